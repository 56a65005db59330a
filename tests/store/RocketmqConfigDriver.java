/*
 * Writes a broker's config/ files with RocketMQ's own managers, for tests/store/test_metadata_files.py
 * (compiled by the test against ../shared/rocketmq-broker/lib). Usage:
 *
 *   RocketmqConfigDriver STORE_ROOT < SPEC
 *
 * SPEC has one command a line, applied in order:
 *   topic NAME READ WRITE PERM [order] [K=V ...]     TopicConfigManager.putTopicConfig (K=V: attributes)
 *   group NAME [retryMaxTimes=N] [consumeEnable=B] [consumeBroadcastEnable=B] [consumeMessageOrderly=B]
 *                                                   SubscriptionGroupManager.putSubscriptionGroupConfig
 *   offset TOPIC GROUP QUEUE OFFSET                  ConsumerOffsetManager's offset table (topic@group)
 *   lmq TOPIC GROUP QUEUE OFFSET                     LmqConsumerOffsetManager's offset table (topic@group)
 *   delay LEVEL OFFSET                               ScheduleMessageService's offset table
 *   filter TOPIC GROUP EXPRESSION                    ConsumerFilterManager.register (SQL92)
 *   orderinfo TOPIC GROUP QUEUE POPTIME INVISIBLE OFFSET...   ConsumerOrderInfoManager.update
 *   requestmode TOPIC GROUP POP|PULL SHARE           MessageRequestModeManager.setMessageRequestMode
 *   mapping TOPIC TOTAL BNAME EPOCH                  a static topic's TopicQueueMappingDetail (queue 0 on BNAME)
 *   timer READTIME FLUSHPOS QUEUEOFFSET MASTEROFFSET TimerCheckpoint
 *   persist                                          every manager's encode(true) to its file, by
 *                                                   MixAll.string2File (the previous content to .bak)
 * The files go where BrokerPathConfigHelper puts them under STORE_ROOT/config.
 *
 *   RocketmqConfigDriver STORE_ROOT dump
 *
 * reads topics, groups, consumer and delay offsets back with the managers' own decode (what a broker does at
 * start, ConfigManager.load without the .bak) and prints them one a line, sorted:
 * "topic NAME READ WRITE PERM ORDER ATTRIBUTES", "group NAME RETRYMAXTIMES CONSUMEENABLE",
 * "offset TOPIC@GROUP QUEUE OFFSET", "delay LEVEL OFFSET", "topicsVersion COUNTER".
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

import org.apache.rocketmq.broker.BrokerPathConfigHelper;
import org.apache.rocketmq.broker.filter.ConsumerFilterManager;
import org.apache.rocketmq.broker.loadbalance.MessageRequestModeManager;
import org.apache.rocketmq.broker.offset.ConsumerOffsetManager;
import org.apache.rocketmq.broker.offset.ConsumerOrderInfoManager;
import org.apache.rocketmq.broker.offset.LmqConsumerOffsetManager;
import org.apache.rocketmq.broker.schedule.DelayOffsetSerializeWrapper;
import org.apache.rocketmq.broker.subscription.SubscriptionGroupManager;
import org.apache.rocketmq.broker.topic.TopicConfigManager;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.DataVersion;
import org.apache.rocketmq.remoting.protocol.body.SetMessageRequestModeRequestBody;
import org.apache.rocketmq.remoting.protocol.body.TopicQueueMappingSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.statictopic.LogicQueueMappingItem;
import org.apache.rocketmq.remoting.protocol.statictopic.TopicQueueMappingDetail;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.store.config.StorePathConfigHelper;
import org.apache.rocketmq.store.timer.TimerCheckpoint;

public class RocketmqConfigDriver {
    public static void main(String[] args) throws Exception {
        String root = args[0];
        if (args.length > 1 && args[1].equals("dump")) {
            dump(root);
            return;
        }
        TopicConfigManager topics = new TopicConfigManager();
        topics.getTopicConfigTable().clear();  // the no-arg manager starts empty; keep only what SPEC adds
        SubscriptionGroupManager groups = new SubscriptionGroupManager();
        groups.getSubscriptionGroupTable().clear();
        ConsumerOffsetManager offsets = new ConsumerOffsetManager();
        LmqConsumerOffsetManager lmq = new LmqConsumerOffsetManager();
        ConcurrentMap<Integer, Long> delay = new ConcurrentHashMap<>();
        DataVersion delayVersion = new DataVersion();
        ConsumerFilterManager filters = new ConsumerFilterManager();
        ConsumerOrderInfoManager orders = new ConsumerOrderInfoManager();
        MessageRequestModeManager modes = new MessageRequestModeManager();
        Map<String, TopicQueueMappingDetail> mappings = new HashMap<>();
        DataVersion mappingVersion = new DataVersion();
        TimerCheckpoint timer = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split("\\s+");
            switch (a[0]) {
                case "":
                    break;
                case "topic": {
                    TopicConfig t = new TopicConfig(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                        Integer.parseInt(a[4]));
                    Map<String, String> attrs = new HashMap<>();
                    for (int i = 5; i < a.length; i++) {
                        if (a[i].equals("order")) {
                            t.setOrder(true);
                        } else {
                            String[] kv = a[i].split("=", 2);
                            attrs.put(kv[0], kv[1]);
                        }
                    }
                    t.setAttributes(attrs);
                    topics.putTopicConfig(t);
                    topics.getDataVersion().nextVersion();
                    break;
                }
                case "group": {
                    SubscriptionGroupConfig g = new SubscriptionGroupConfig();
                    g.setGroupName(a[1]);
                    for (int i = 2; i < a.length; i++) {
                        String[] kv = a[i].split("=", 2);
                        switch (kv[0]) {
                            case "retryMaxTimes": g.setRetryMaxTimes(Integer.parseInt(kv[1])); break;
                            case "consumeEnable": g.setConsumeEnable(Boolean.parseBoolean(kv[1])); break;
                            case "consumeBroadcastEnable": g.setConsumeBroadcastEnable(Boolean.parseBoolean(kv[1])); break;
                            case "consumeMessageOrderly": g.setConsumeMessageOrderly(Boolean.parseBoolean(kv[1])); break;
                            default: throw new IllegalArgumentException(kv[0]);
                        }
                    }
                    groups.putSubscriptionGroupConfig(g);
                    groups.getDataVersion().nextVersion();
                    break;
                }
                case "offset":
                    offsets.getOffsetTable().computeIfAbsent(a[1] + "@" + a[2], k -> new ConcurrentHashMap<>())
                        .put(Integer.parseInt(a[3]), Long.parseLong(a[4]));
                    offsets.getDataVersion().nextVersion();
                    break;
                case "lmq":
                    lmq.getLmqOffsetTable().put(a[1] + "@" + a[2], Long.parseLong(a[4]));
                    break;
                case "delay":
                    delay.put(Integer.parseInt(a[1]), Long.parseLong(a[2]));
                    delayVersion.nextVersion();
                    break;
                case "filter":
                    filters.register(a[1], a[2], a[3], "SQL92", 1L);
                    break;
                case "orderinfo": {
                    List<Long> offs = new ArrayList<>();
                    for (int i = 6; i < a.length; i++) {
                        offs.add(Long.parseLong(a[i]));
                    }
                    orders.update("attempt-1", false, a[1], a[2], Integer.parseInt(a[3]), Long.parseLong(a[4]),
                        Long.parseLong(a[5]), offs, new StringBuilder());
                    break;
                }
                case "requestmode": {
                    SetMessageRequestModeRequestBody b = new SetMessageRequestModeRequestBody();
                    b.setTopic(a[1]);
                    b.setConsumerGroup(a[2]);
                    b.setMode(MessageRequestMode.valueOf(a[3]));
                    b.setPopShareQueueNum(Integer.parseInt(a[4]));
                    modes.setMessageRequestMode(a[1], a[2], b);
                    break;
                }
                case "mapping": {
                    TopicQueueMappingDetail d = new TopicQueueMappingDetail(a[1], Integer.parseInt(a[2]), a[3],
                        Long.parseLong(a[4]));
                    List<LogicQueueMappingItem> items = new ArrayList<>();
                    items.add(new LogicQueueMappingItem(0, 0, a[3], 0L, 0L, -1L, -1L, -1L));
                    TopicQueueMappingDetail.putMappingInfo(d, 0, items);
                    mappings.put(a[1], d);
                    mappingVersion.nextVersion();
                    break;
                }
                case "timer":
                    timer = new TimerCheckpoint(BrokerPathConfigHelper.getTimerCheckPath(root));
                    timer.setLastReadTimeMs(Long.parseLong(a[1]));
                    timer.setLastTimerLogFlushPos(Long.parseLong(a[2]));
                    timer.setLastTimerQueueOffset(Long.parseLong(a[3]));
                    timer.setMasterTimerQueueOffset(Long.parseLong(a[4]));
                    timer.updateDateVersion(7L);
                    timer.flush();
                    timer.shutdown();
                    break;
                case "persist": {
                    MixAll.string2File(topics.encode(true), BrokerPathConfigHelper.getTopicConfigPath(root));
                    MixAll.string2File(groups.encode(true), BrokerPathConfigHelper.getSubscriptionGroupPath(root));
                    MixAll.string2File(offsets.encode(true), BrokerPathConfigHelper.getConsumerOffsetPath(root));
                    MixAll.string2File(lmq.encode(true), BrokerPathConfigHelper.getLmqConsumerOffsetPath(root));
                    DelayOffsetSerializeWrapper dw = new DelayOffsetSerializeWrapper();
                    dw.setOffsetTable(delay);
                    dw.setDataVersion(delayVersion);
                    MixAll.string2File(dw.toJson(true), StorePathConfigHelper.getDelayOffsetStorePath(root));
                    MixAll.string2File(filters.encode(true), BrokerPathConfigHelper.getConsumerFilterPath(root));
                    MixAll.string2File(orders.encode(true), BrokerPathConfigHelper.getConsumerOrderInfoPath(root));
                    MixAll.string2File(modes.encode(true), BrokerPathConfigHelper.getMessageRequestModePath(root));
                    TopicQueueMappingSerializeWrapper mw = new TopicQueueMappingSerializeWrapper();
                    mw.setTopicQueueMappingInfoMap(new ConcurrentHashMap<>(mappings));
                    mw.setDataVersion(mappingVersion);
                    MixAll.string2File(mw.toJson(true), BrokerPathConfigHelper.getTopicQueueMappingPath(root));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        System.out.println("ok");
    }

    static void dump(String root) throws Exception {
        List<String> out = new ArrayList<>();
        TopicConfigManager topics = new TopicConfigManager();
        topics.getTopicConfigTable().clear();
        topics.decode(MixAll.file2String(BrokerPathConfigHelper.getTopicConfigPath(root)));
        for (TopicConfig t : topics.getTopicConfigTable().values()) {
            out.add("topic " + t.getTopicName() + " " + t.getReadQueueNums() + " " + t.getWriteQueueNums() + " "
                + t.getPerm() + " " + t.isOrder() + " " + new java.util.TreeMap<>(t.getAttributes()));
        }
        out.add("topicsVersion " + topics.getDataVersion().getCounter().get());
        SubscriptionGroupManager groups = new SubscriptionGroupManager();
        groups.getSubscriptionGroupTable().clear();
        groups.decode(MixAll.file2String(BrokerPathConfigHelper.getSubscriptionGroupPath(root)));
        for (SubscriptionGroupConfig g : groups.getSubscriptionGroupTable().values()) {
            out.add("group " + g.getGroupName() + " " + g.getRetryMaxTimes() + " " + g.isConsumeEnable());
        }
        ConsumerOffsetManager offsets = new ConsumerOffsetManager();
        offsets.decode(MixAll.file2String(BrokerPathConfigHelper.getConsumerOffsetPath(root)));
        for (Map.Entry<String, ConcurrentMap<Integer, Long>> e : offsets.getOffsetTable().entrySet()) {
            for (Map.Entry<Integer, Long> q : e.getValue().entrySet()) {
                out.add("offset " + e.getKey() + " " + q.getKey() + " " + q.getValue());
            }
        }
        String delay = MixAll.file2String(StorePathConfigHelper.getDelayOffsetStorePath(root));
        if (delay != null) {
            DelayOffsetSerializeWrapper w = DelayOffsetSerializeWrapper.fromJson(delay,
                DelayOffsetSerializeWrapper.class);
            for (Map.Entry<Integer, Long> e : w.getOffsetTable().entrySet()) {
                out.add("delay " + e.getKey() + " " + e.getValue());
            }
        }
        java.util.Collections.sort(out);
        for (String s : out) {
            System.out.println(s);
        }
    }
}
