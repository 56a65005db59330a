/*
 * RocketMQ's own producer and consumer, driven by `mqctl demo --rocketmq-home` and tests/e2e: compiled at
 * run time (javac) against the installation's lib/ (../shared/rocketmq-broker/lib in the tests). One line
 * of output per event, flushed at once. Usage:
 *
 *   version
 *       the RocketMQ version of the class path (MQVersion.CURRENT_VERSION), e.g. "V5_3_3".
 *   send NAMESRV TOPIC PREFIX COUNT
 *       COUNT messages, synchronously; a failed send is retried (the same key) until it is acknowledged
 *       or 60 s have passed. Prints "ok KEY COMMITLOG_OFFSET MILLIS PORT UNIQ_KEY" per acknowledged message.
 *   loop NAMESRV TOPIC PREFIX STOPFILE MAXSECONDS
 *       one message after another (1 s send timeout, no retry inside the client, the next key after a
 *       failure too) until STOPFILE exists or MAXSECONDS have passed. Prints "ok KEY COMMITLOG_OFFSET
 *       MILLIS PORT UNIQ_KEY" per acknowledged message (PORT: the broker that stored it) and "fail KEY MILLIS REASON" per failed send, MILLIS being
 *       System.currentTimeMillis() when the answer came.
 *   read NAMESRV TOPIC
 *       every message of every queue of TOPIC, from offset 0 (DefaultMQPullConsumer): "msg KEY OFFSET
 *       UNIQ_KEY".
 *
 * Every send is synchronous with no retry inside the client, so that a message is stored at most once
 * per attempt and "ok" means RocketMQ's SEND_OK (with allAckInSyncStateSet: every SyncStateSet member
 * has it).
 */
import java.io.File;
import java.net.InetSocketAddress;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class RocketMQDriver {
    static DefaultMQProducer producer(String namesrv, int timeoutMillis) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("mqctl_driver_producer");
        p.setNamesrvAddr(namesrv);
        p.setSendMsgTimeout(timeoutMillis);
        p.setRetryTimesWhenSendFailed(0);
        p.setPollNameServerInterval(200);  // a new master's route within 0.2 s of its registration
        p.setInstanceName("mqctl-" + ProcessHandle.current().pid());
        p.start();
        return p;
    }

    static Message message(String topic, String key) {
        return new Message(topic, "tag", key, ("body of " + key).getBytes());
    }

    static long offset(SendResult r) throws Exception {
        return MessageDecoder.decodeMessageId(r.getOffsetMsgId()).getOffset();
    }

    /** The port of the broker that stored the message (the store host in its offsetMsgId). */
    static int storedBy(SendResult r) throws Exception {
        return ((InetSocketAddress) MessageDecoder.decodeMessageId(r.getOffsetMsgId()).getAddress()).getPort();
    }

    static String reason(Throwable e) {
        String s = e.getClass().getSimpleName() + ": " + e.getMessage();
        return s.replace('\n', ' ');
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "version": System.out.println(MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION)); break;
            case "send": send(args[1], args[2], args[3], Integer.parseInt(args[4])); break;
            case "loop": loop(args[1], args[2], args[3], new File(args[4]), Integer.parseInt(args[5])); break;
            case "read": read(args[1], args[2]); break;
            default: throw new IllegalArgumentException(args[0]);
        }
        System.exit(0);
    }

    static void send(String namesrv, String topic, String prefix, int count) throws Exception {
        DefaultMQProducer p = producer(namesrv, 5000);
        try {
            for (int i = 0; i < count; i++) {
                String key = prefix + "-" + i;
                long deadline = System.currentTimeMillis() + 60000;
                while (true) {
                    try {
                        SendResult r = p.send(message(topic, key));
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            System.out.println("ok " + key + " " + offset(r) + " " + System.currentTimeMillis() + " " + storedBy(r) + " " + r.getMsgId());
                            break;
                        }
                        System.out.println("notok " + key + " " + r.getSendStatus());
                    } catch (Exception e) {
                        System.out.println("retry " + key + " " + reason(e));
                    }
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("message " + key + " not acknowledged within 60 s");
                    }
                    Thread.sleep(200);
                }
            }
        } finally {
            p.shutdown();
        }
    }

    static void loop(String namesrv, String topic, String prefix, File stop, int maxSeconds) throws Exception {
        DefaultMQProducer p = producer(namesrv, 1000);
        long end = System.currentTimeMillis() + maxSeconds * 1000L;
        try {
            for (int i = 0; !stop.exists() && System.currentTimeMillis() < end; i++) {
                String key = prefix + "-" + i;
                try {
                    SendResult r = p.send(message(topic, key));
                    long now = System.currentTimeMillis();
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        System.out.println("ok " + key + " " + offset(r) + " " + now + " " + storedBy(r) + " " + r.getMsgId());
                    } else {
                        System.out.println("fail " + key + " " + now + " " + r.getSendStatus());
                    }
                    Thread.sleep(20);
                } catch (Exception e) {
                    System.out.println("fail " + key + " " + System.currentTimeMillis() + " " + reason(e));
                    Thread.sleep(20);
                }
            }
        } finally {
            p.shutdown();
        }
    }

    static void read(String namesrv, String topic) throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer("mqctl_driver_reader");
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("mqctl-" + ProcessHandle.current().pid());
        c.start();
        try {
            Set<MessageQueue> queues = c.fetchSubscribeMessageQueues(topic);
            for (MessageQueue mq : queues) {
                long offset = 0;
                long max = c.maxOffset(mq);
                while (offset < max) {
                    PullResult r = c.pull(mq, "*", offset, 32, 10000);
                    if (r.getPullStatus() == PullStatus.FOUND) {
                        for (MessageExt m : r.getMsgFoundList()) {
                            System.out.println("msg " + m.getKeys() + " " + m.getCommitLogOffset() + " " + MessageClientIDSetter.getUniqID(m));
                        }
                    } else if (r.getNextBeginOffset() <= offset) {
                        throw new IllegalStateException(mq + " at " + offset + " of " + max + ": " + r);
                    }
                    offset = r.getNextBeginOffset();
                }
                System.out.println("queue " + mq.getBrokerName() + " " + mq.getQueueId() + " " + max);
            }
        } finally {
            c.shutdown();
        }
    }
}
