/*
 * The broker side of RocketMQ's controller conversation, built from RocketMQ's own classes (compiled
 * unchanged in ../shared/rocketmq-java/lib), for tests/interop.
 *
 * Each replica is what a RocketMQ 5.x broker in controller mode has towards its controllers:
 * - its own NettyRemotingClient, with the requests built exactly as
 *   broker/src/main/java/org/apache/rocketmq/broker/out/BrokerOuterAPI.java builds them
 *   (getControllerMetaData, getNextBrokerId, applyBrokerId, registerBrokerToController, brokerElect,
 *   alterSyncStateSet, getReplicaInfo, sendHeartbeatToController: one-way 904 to every controller), in the
 *   order broker/.../controller/ReplicasManager.java sends them;
 * - a NettyRemotingServer at its registered address (127.0.0.1, a free port) that records every
 *   NOTIFY_BROKER_ROLE_CHANGED (1008) it receives, decoded with RocketMQ's header and body classes, and
 *   changes the replica's role as ReplicasManager.changeBrokerRole does, and that answers
 *   GET_BROKER_EPOCH_CACHE (1007) with its epoch entries, as AdminBrokerProcessor.getBrokerEpochCache does.
 * A replica never polls the controller (a real broker also polls GetReplicaInfo): what it learns of an
 * election comes from the answer to its own request or from a 1008.
 *
 * One more NettyRemotingServer stands in for a name server: it answers GET_BROKER_CLUSTER_INFO (106) with
 * a ClusterInfo of the replicas (master as id 0, slaves under their controller ids), what mqadmin's
 * getBrokerEpoch and getSyncStateSet -c read.
 *
 * Protocol: one command per line on stdin, "<rid> <command> <args...>"; one JSON line on stdout per
 * command, {"reply": rid, ...}; asynchronous JSON lines {"event": ...} (1008s received) in between.
 * The serialize type is RocketMQ's: -Drocketmq.serialize.type / $ROCKETMQ_SERIALIZE_TYPE.
 */

import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import io.netty.channel.ChannelHandlerContext;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.netty.NettyRemotingServer;
import org.apache.rocketmq.remoting.netty.NettyRequestProcessor;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.EpochEntry;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.BrokerMemberGroup;
import org.apache.rocketmq.remoting.protocol.body.BrokerReplicasInfo;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.ElectMasterResponseBody;
import org.apache.rocketmq.remoting.protocol.body.EpochEntryCache;
import org.apache.rocketmq.remoting.protocol.body.SyncStateSet;
import org.apache.rocketmq.remoting.protocol.header.NotifyBrokerRoleChangedRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.AlterSyncStateSetRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.AlterSyncStateSetResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.ElectMasterRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.ElectMasterResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.GetMetaDataResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.GetReplicaInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.GetReplicaInfoResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.ApplyBrokerIdRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.ApplyBrokerIdResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.GetNextBrokerIdRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.GetNextBrokerIdResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.RegisterBrokerToControllerRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.RegisterBrokerToControllerResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.BrokerHeartbeatRequestHeader;

public class BrokerDriver {
    static final long TIMEOUT_MILLIS = 3000; // BrokerOuterAPI's invokeSync timeout
    static final Object OUT = new Object();

    static List<String> controllers;
    static String clusterName;
    static long heartbeatIntervalMillis;
    static long heartbeatTimeoutMillis;
    static volatile String controllerLeaderAddress = "";
    static final List<Replica> replicas = new CopyOnWriteArrayList<>();
    static final ScheduledExecutorService beater = Executors.newSingleThreadScheduledExecutor();
    static final ExecutorService processors = Executors.newFixedThreadPool(2);
    static NettyRemotingServer namesrv;

    static void emit(Map<String, Object> line) {
        String text = JSON.toJSONString(line);
        synchronized (OUT) {
            System.out.println(text);
            System.out.flush();
        }
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    static List<Long> sorted(Set<Long> ids) {
        return ids == null ? null : new ArrayList<>(new TreeSet<>(ids));
    }

    /** What the test needs of any answer: RocketMQ's code, remark, header fields and serialize type. */
    static Map<String, Object> raw(RemotingCommand response) {
        return map("code", response.getCode(), "remark", response.getRemark(),
            "ext", response.getExtFields() == null ? new HashMap<>() : response.getExtFields(),
            "serializeType", response.getSerializeTypeCurrentRPC().name(),
            "body", response.getBody() == null ? null : new String(response.getBody(), StandardCharsets.UTF_8));
    }

    static class Replica {
        final int index;
        final String brokerName;
        final NettyRemotingClient client;
        final NettyRemotingServer server;
        final String address;
        volatile boolean beating;
        volatile long lastBeatMillis;
        volatile String registerCheckCode; // the temp metadata file's, kept for a re-apply
        // ReplicasManager's view
        Long brokerControllerId;
        Long masterBrokerId;
        String masterAddress = "";
        int masterEpoch = 0;
        Set<Long> syncStateSet = new HashSet<>();
        int syncStateSetEpoch = 0;
        long maxOffset = 0;
        long confirmOffset = 0;
        int electionPriority = Integer.MAX_VALUE;
        final List<EpochEntry> epochs = new ArrayList<>();

        Replica(int index, String brokerName) {
            this.index = index;
            this.brokerName = brokerName;
            NettyClientConfig clientConfig = new NettyClientConfig();
            clientConfig.setClientWorkerThreads(1);
            clientConfig.setClientCallbackExecutorThreads(1);
            this.client = new NettyRemotingClient(clientConfig);
            // a controller must not push 1008 over the broker's own connections: record it if one does
            this.client.registerProcessor(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, new Processor((ctx, request) -> {
                emit(map("event", "notify_on_client_connection", "replica", this.index, "at", System.currentTimeMillis(),
                    "ext", request.getExtFields()));
                return null;
            }), processors);
            this.client.start();
            NettyServerConfig serverConfig = new NettyServerConfig();
            serverConfig.setBindAddress("127.0.0.1");
            serverConfig.setListenPort(0);
            serverConfig.setServerWorkerThreads(2);
            serverConfig.setServerSelectorThreads(1);
            serverConfig.setServerCallbackExecutorThreads(1);
            this.server = new NettyRemotingServer(serverConfig);
            this.server.registerProcessor(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, new Processor(this::onNotify), processors);
            this.server.registerProcessor(RequestCode.GET_BROKER_EPOCH_CACHE, new Processor(this::onEpochCache), processors);
            this.server.start();
            this.address = "127.0.0.1:" + this.server.localListenPort();
        }

        /** AdminBrokerProcessor.notifyBrokerRoleChanged: RocketMQ's decoders, then changeBrokerRole. */
        RemotingCommand onNotify(ChannelHandlerContext ctx, RemotingCommand request) throws Exception {
            long at = System.currentTimeMillis();
            NotifyBrokerRoleChangedRequestHeader header =
                request.decodeCommandCustomHeader(NotifyBrokerRoleChangedRequestHeader.class);
            SyncStateSet body = RemotingSerializable.decode(request.getBody(), SyncStateSet.class);
            emit(map("event", "notify", "replica", index, "at", at,
                "oneway", request.isOnewayRPC(), "serializeType", request.getSerializeTypeCurrentRPC().name(),
                "language", request.getLanguage().name(), "ext", request.getExtFields(),
                "masterAddress", header.getMasterAddress(), "masterBrokerId", header.getMasterBrokerId(),
                "masterEpoch", header.getMasterEpoch(), "syncStateSetEpoch", header.getSyncStateSetEpoch(),
                "syncStateSet", sorted(body.getSyncStateSet()), "bodySyncStateSetEpoch", body.getSyncStateSetEpoch()));
            changeBrokerRole(header.getMasterBrokerId(), header.getMasterAddress(), header.getMasterEpoch(),
                header.getSyncStateSetEpoch(), body.getSyncStateSet());
            RemotingCommand response = RemotingCommand.createResponseCommand(null);
            response.setCode(ResponseCode.SUCCESS);
            response.setRemark(null);
            return response;
        }

        /** AdminBrokerProcessor.getBrokerEpochCache: brokerId is the config id, 0 for the master. */
        synchronized RemotingCommand onEpochCache(ChannelHandlerContext ctx, RemotingCommand request) {
            RemotingCommand response = RemotingCommand.createResponseCommand(null);
            List<EpochEntry> copy = new ArrayList<>();
            for (EpochEntry e : epochs) {
                copy.add(new EpochEntry(e));
            }
            EpochEntryCache cache = new EpochEntryCache(clusterName, brokerName, configBrokerId(), copy, maxOffset);
            response.setBody(cache.encode());
            response.setCode(ResponseCode.SUCCESS);
            response.setRemark(null);
            return response;
        }

        synchronized long configBrokerId() {
            return isMaster() ? 0L : (brokerControllerId == null ? -1L : brokerControllerId);
        }

        synchronized boolean isMaster() {
            return masterBrokerId != null && masterBrokerId.equals(brokerControllerId);
        }

        /** ReplicasManager.changeBrokerRole, with the epoch file of the store reduced to a list. */
        synchronized void changeBrokerRole(Long newMasterBrokerId, String newMasterAddress, Integer newMasterEpoch,
            Integer newSyncStateSetEpoch, Set<Long> newSyncStateSet) {
            if (newMasterBrokerId == null || newMasterEpoch == null || newMasterEpoch <= masterEpoch) {
                return;
            }
            masterEpoch = newMasterEpoch;
            masterBrokerId = newMasterBrokerId;
            masterAddress = newMasterAddress;
            if (newMasterBrokerId.equals(brokerControllerId)) {
                masterAddress = address;
                if (newSyncStateSetEpoch != null && newSyncStateSetEpoch > syncStateSetEpoch && newSyncStateSet != null) {
                    syncStateSet = new HashSet<>(newSyncStateSet);
                    syncStateSetEpoch = newSyncStateSetEpoch;
                }
            }
            // a new master epoch starts at the end of the log (AutoSwitchHAService.changeToMaster / the
            // slave's truncation to the master's epochs)
            if (epochs.isEmpty() || epochs.get(epochs.size() - 1).getEpoch() < newMasterEpoch) {
                if (!epochs.isEmpty()) {
                    epochs.get(epochs.size() - 1).setEndOffset(maxOffset);
                }
                epochs.add(new EpochEntry(newMasterEpoch, maxOffset));
            }
        }

        synchronized int lastEpoch() {
            return epochs.isEmpty() ? -1 : epochs.get(epochs.size() - 1).getEpoch();
        }

        synchronized Map<String, Object> state() {
            List<Map<String, Object>> es = new ArrayList<>();
            for (EpochEntry e : epochs) {
                es.add(map("epoch", e.getEpoch(), "startOffset", e.getStartOffset(), "endOffset", e.getEndOffset()));
            }
            return map("replica", index, "brokerName", brokerName, "address", address,
                "brokerControllerId", brokerControllerId, "masterBrokerId", masterBrokerId,
                "masterAddress", masterAddress, "masterEpoch", masterEpoch, "syncStateSet", sorted(syncStateSet),
                "syncStateSetEpoch", syncStateSetEpoch, "maxOffset", maxOffset, "epochs", es,
                "isMaster", isMaster(), "beating", beating, "lastBeat", lastBeatMillis);
        }

        RemotingCommand invokeLeader(RemotingCommand request) throws Exception {
            if (controllerLeaderAddress.isEmpty()) {
                updateControllerMetadata(this);
            }
            return client.invokeSync(controllerLeaderAddress, request, TIMEOUT_MILLIS);
        }

        /** BrokerOuterAPI.sendHeartbeatToController, to every controller (ReplicasManager). */
        void sendHeartbeatToController() {
            BrokerHeartbeatRequestHeader header = new BrokerHeartbeatRequestHeader();
            synchronized (this) {
                header.setClusterName(clusterName);
                header.setBrokerAddr(address);
                header.setBrokerName(brokerName);
                header.setEpoch(lastEpoch());
                header.setMaxOffset(maxOffset);
                header.setConfirmOffset(confirmOffset);
                header.setHeartbeatTimeoutMills(heartbeatTimeoutMillis);
                header.setElectionPriority(electionPriority);
                header.setBrokerId(brokerControllerId);
            }
            for (String controller : controllers) {
                RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.BROKER_HEARTBEAT, header);
                try {
                    client.invokeOneway(controller, request, TIMEOUT_MILLIS);
                } catch (Exception e) {
                    // a controller that is down: the next beat tries again, as the broker's does
                }
            }
            lastBeatMillis = System.currentTimeMillis();
        }
    }

    static class Processor implements NettyRequestProcessor {
        interface Fn {
            RemotingCommand apply(ChannelHandlerContext ctx, RemotingCommand request) throws Exception;
        }

        final Fn fn;

        Processor(Fn fn) {
            this.fn = fn;
        }

        @Override
        public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand request) throws Exception {
            try {
                return fn.apply(ctx, request);
            } catch (Exception e) {
                emit(map("event", "error", "where", "processor " + request.getCode(), "error", e.toString()));
                throw e;
            }
        }

        @Override
        public boolean rejectRequest() {
            return false;
        }
    }

    /** ReplicasManager.updateControllerMetadata: the first controller that names a leader. */
    static Map<String, Object> updateControllerMetadata(Replica r) throws Exception {
        List<Object> answers = new ArrayList<>();
        for (String address : controllers) {
            try {
                RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_GET_METADATA_INFO, null);
                RemotingCommand response = r.client.invokeSync(address, request, TIMEOUT_MILLIS);
                if (response.getCode() != ResponseCode.SUCCESS) {
                    answers.add(map("address", address, "code", response.getCode(), "remark", response.getRemark()));
                    continue;
                }
                GetMetaDataResponseHeader h = response.decodeCommandCustomHeader(GetMetaDataResponseHeader.class);
                answers.add(map("address", address, "group", h.getGroup(), "controllerLeaderId", h.getControllerLeaderId(),
                    "controllerLeaderAddress", h.getControllerLeaderAddress(), "isLeader", h.isLeader(), "peers", h.getPeers()));
                if (h.getControllerLeaderAddress() != null && !h.getControllerLeaderAddress().isEmpty()) {
                    controllerLeaderAddress = h.getControllerLeaderAddress();
                    return map("leader", controllerLeaderAddress, "answers", answers);
                }
            } catch (Exception e) {
                answers.add(map("address", address, "error", e.toString()));
            }
        }
        return map("leader", null, "answers", answers);
    }

    static Replica replica(String index) {
        return replicas.get(Integer.parseInt(index) - 1);
    }

    static Set<Long> ids(String text) {
        Set<Long> out = new HashSet<>();
        for (String s : text.split(",")) {
            if (!s.isEmpty()) {
                out.add(Long.parseLong(s));
            }
        }
        return out;
    }

    /** GetNextBrokerId, ApplyBrokerId, RegisterBroker: ReplicasManager.register and what follows it. */
    static Map<String, Object> register(Replica r) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
            new GetNextBrokerIdRequestHeader(clusterName, r.brokerName));
        RemotingCommand response = r.invokeLeader(request);
        out.put("nextBrokerId", raw(response));
        if (response.getCode() != ResponseCode.SUCCESS) {
            return out;
        }
        GetNextBrokerIdResponseHeader next = response.decodeCommandCustomHeader(GetNextBrokerIdResponseHeader.class);
        Long brokerId = next.getNextBrokerId();
        String registerCheckCode = r.address + ";" + System.currentTimeMillis();
        r.registerCheckCode = registerCheckCode;
        request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_APPLY_BROKER_ID,
            new ApplyBrokerIdRequestHeader(clusterName, r.brokerName, brokerId, registerCheckCode));
        response = r.invokeLeader(request);
        out.put("applyBrokerId", raw(response));
        if (response.getCode() != ResponseCode.SUCCESS) {
            return out;
        }
        ApplyBrokerIdResponseHeader applied = response.decodeCommandCustomHeader(ApplyBrokerIdResponseHeader.class);
        out.put("applied", map("clusterName", applied.getClusterName(), "brokerName", applied.getBrokerName()));
        synchronized (r) {
            r.brokerControllerId = brokerId;
        }
        request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_REGISTER_BROKER,
            new RegisterBrokerToControllerRequestHeader(clusterName, r.brokerName, brokerId, r.address));
        response = r.invokeLeader(request);
        out.put("registerBroker", raw(response));
        if (response.getCode() != ResponseCode.SUCCESS) {
            return out;
        }
        RegisterBrokerToControllerResponseHeader h = response.decodeCommandCustomHeader(RegisterBrokerToControllerResponseHeader.class);
        SyncStateSet sss = RemotingSerializable.decode(response.getBody(), SyncStateSet.class);
        out.put("registered", map("clusterName", h.getClusterName(), "brokerName", h.getBrokerName(),
            "masterBrokerId", h.getMasterBrokerId(), "masterAddress", h.getMasterAddress(), "masterEpoch", h.getMasterEpoch(),
            "syncStateSetEpoch", h.getSyncStateSetEpoch(), "syncStateSet", sorted(sss.getSyncStateSet()),
            "bodySyncStateSetEpoch", sss.getSyncStateSetEpoch()));
        if (h.getMasterBrokerId() != null) {
            r.changeBrokerRole(h.getMasterBrokerId(), h.getMasterAddress(), h.getMasterEpoch(), h.getSyncStateSetEpoch(),
                sss.getSyncStateSet());
        }
        out.put("brokerId", brokerId);
        return out;
    }

    /** BrokerOuterAPI.brokerElect (ElectMasterRequestHeader.ofBrokerTrigger), then ReplicasManager's role change. */
    static Map<String, Object> brokerElect(Replica r) throws Exception {
        ElectMasterRequestHeader header = ElectMasterRequestHeader.ofBrokerTrigger(clusterName, r.brokerName, r.brokerControllerId);
        RemotingCommand response = r.invokeLeader(RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_ELECT_MASTER, header));
        Map<String, Object> out = raw(response);
        if (response.getCode() == ResponseCode.SUCCESS || response.getCode() == ResponseCode.CONTROLLER_MASTER_STILL_EXIST) {
            ElectMasterResponseHeader h = response.decodeCommandCustomHeader(ElectMasterResponseHeader.class);
            ElectMasterResponseBody body = RemotingSerializable.decode(response.getBody(), ElectMasterResponseBody.class);
            out.put("masterBrokerId", h.getMasterBrokerId());
            out.put("masterAddress", h.getMasterAddress());
            out.put("masterEpoch", h.getMasterEpoch());
            out.put("syncStateSetEpoch", h.getSyncStateSetEpoch());
            out.put("syncStateSet", sorted(body.getSyncStateSet()));
            BrokerMemberGroup group = body.getBrokerMemberGroup();
            if (group != null) {
                Map<String, Object> addrs = new LinkedHashMap<>();
                for (Map.Entry<Long, String> e : new java.util.TreeMap<>(group.getBrokerAddrs()).entrySet()) {
                    addrs.put(String.valueOf(e.getKey()), e.getValue());
                }
                out.put("brokerMemberGroup", map("cluster", group.getCluster(), "brokerName", group.getBrokerName(), "brokerAddrs", addrs));
            }
            if (h.getMasterAddress() != null && !h.getMasterAddress().isEmpty() && h.getMasterBrokerId() != null) {
                r.changeBrokerRole(h.getMasterBrokerId(), h.getMasterAddress(), h.getMasterEpoch(), h.getSyncStateSetEpoch(),
                    body.getSyncStateSet());
            }
        }
        return out;
    }

    /** BrokerOuterAPI.alterSyncStateSet with the master's masterEpoch and syncStateSetEpoch (doReportSyncStateSetChanged). */
    static Map<String, Object> alterSyncStateSet(Replica r, Set<Long> newSyncStateSet, Integer masterEpoch, Integer ssEpoch)
        throws Exception {
        int me;
        int se;
        synchronized (r) {
            me = masterEpoch != null ? masterEpoch : r.masterEpoch;
            se = ssEpoch != null ? ssEpoch : r.syncStateSetEpoch;
        }
        AlterSyncStateSetRequestHeader header = new AlterSyncStateSetRequestHeader(r.brokerName, r.brokerControllerId, me);
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header);
        request.setBody(new SyncStateSet(newSyncStateSet, se).encode());
        RemotingCommand response = r.invokeLeader(request);
        Map<String, Object> out = raw(response);
        if (response.getExtFields() != null && response.getExtFields().containsKey("newSyncStateSetEpoch")) {
            AlterSyncStateSetResponseHeader h = response.decodeCommandCustomHeader(AlterSyncStateSetResponseHeader.class);
            out.put("newSyncStateSetEpoch", h.getNewSyncStateSetEpoch());
        }
        if (response.getCode() == ResponseCode.SUCCESS) {
            SyncStateSet result = RemotingSerializable.decode(response.getBody(), SyncStateSet.class);
            out.put("syncStateSet", sorted(result.getSyncStateSet()));
            out.put("bodySyncStateSetEpoch", result.getSyncStateSetEpoch());
            synchronized (r) { // ReplicasManager.changeSyncStateSet
                if (result.getSyncStateSetEpoch() > r.syncStateSetEpoch) {
                    r.syncStateSet = new HashSet<>(result.getSyncStateSet());
                    r.syncStateSetEpoch = result.getSyncStateSetEpoch();
                }
            }
        }
        return out;
    }

    /** BrokerOuterAPI.getReplicaInfo. */
    static Map<String, Object> getReplicaInfo(Replica r, String brokerName) throws Exception {
        RemotingCommand response = r.invokeLeader(RemotingCommand.createRequestCommand(
            RequestCode.CONTROLLER_GET_REPLICA_INFO, new GetReplicaInfoRequestHeader(brokerName)));
        Map<String, Object> out = raw(response);
        if (response.getCode() == ResponseCode.SUCCESS) {
            GetReplicaInfoResponseHeader h = response.decodeCommandCustomHeader(GetReplicaInfoResponseHeader.class);
            SyncStateSet sss = RemotingSerializable.decode(response.getBody(), SyncStateSet.class);
            out.put("masterBrokerId", h.getMasterBrokerId());
            out.put("masterAddress", h.getMasterAddress());
            out.put("masterEpoch", h.getMasterEpoch());
            out.put("syncStateSet", sorted(sss.getSyncStateSet()));
            out.put("syncStateSetEpoch", sss.getSyncStateSetEpoch());
        }
        return out;
    }

    /** CONTROLLER_GET_SYNC_STATE_DATA as MQClientAPIImpl.getInSyncStateData sends it; decoded as BrokerReplicasInfo. */
    static Map<String, Object> getSyncStateData(Replica r, List<String> brokerNames) throws Exception {
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, null);
        request.setBody(RemotingSerializable.encode(brokerNames));
        RemotingCommand response = r.invokeLeader(request);
        Map<String, Object> out = raw(response);
        if (response.getCode() == ResponseCode.SUCCESS) {
            BrokerReplicasInfo info = RemotingSerializable.decode(response.getBody(), BrokerReplicasInfo.class);
            Map<String, Object> table = new LinkedHashMap<>();
            for (Map.Entry<String, BrokerReplicasInfo.ReplicasInfo> e : info.getReplicasInfoTable().entrySet()) {
                BrokerReplicasInfo.ReplicasInfo ri = e.getValue();
                table.put(e.getKey(), map("masterBrokerId", ri.getMasterBrokerId(), "masterAddress", ri.getMasterAddress(),
                    "masterEpoch", ri.getMasterEpoch(), "syncStateSetEpoch", ri.getSyncStateSetEpoch(),
                    "inSyncReplicas", identities(ri.getInSyncReplicas()), "notInSyncReplicas", identities(ri.getNotInSyncReplicas())));
            }
            out.put("replicasInfoTable", table);
        }
        return out;
    }

    static List<Object> identities(List<BrokerReplicasInfo.ReplicaIdentity> list) {
        List<Object> out = new ArrayList<>();
        for (BrokerReplicasInfo.ReplicaIdentity id : list) {
            out.add(map("brokerName", id.getBrokerName(), "brokerId", id.getBrokerId(), "brokerAddress", id.getBrokerAddress(),
                "alive", id.getAlive(), "toString", id.toString()));
        }
        return out;
    }

    /** A name server stand-in: GET_BROKER_CLUSTER_INFO (106) answered from the replicas' roles. */
    static NettyRemotingServer startNamesrv() {
        NettyServerConfig config = new NettyServerConfig();
        config.setBindAddress("127.0.0.1");
        config.setListenPort(0);
        config.setServerWorkerThreads(1);
        config.setServerSelectorThreads(1);
        config.setServerCallbackExecutorThreads(1);
        NettyRemotingServer server = new NettyRemotingServer(config);
        server.registerDefaultProcessor(new Processor((ctx, request) -> {
            if (request.getCode() != RequestCode.GET_BROKER_CLUSTER_INFO) {
                return RemotingCommand.createResponseCommand(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    " request type " + request.getCode() + " not supported");
            }
            ClusterInfo info = new ClusterInfo();
            Map<String, org.apache.rocketmq.remoting.protocol.route.BrokerData> brokers = new HashMap<>();
            Map<String, Set<String>> clusters = new HashMap<>();
            for (Replica r : replicas) {
                synchronized (r) {
                    if (r.brokerControllerId == null) {
                        continue;
                    }
                    org.apache.rocketmq.remoting.protocol.route.BrokerData data = brokers.computeIfAbsent(r.brokerName,
                        n -> new org.apache.rocketmq.remoting.protocol.route.BrokerData(clusterName, n, new HashMap<>()));
                    data.getBrokerAddrs().put(r.configBrokerId(), r.address);
                    clusters.computeIfAbsent(clusterName, c -> new HashSet<>()).add(r.brokerName);
                }
            }
            info.setBrokerAddrTable(brokers);
            info.setClusterAddrTable(clusters);
            RemotingCommand response = RemotingCommand.createResponseCommand(null);
            response.setBody(info.encode());
            response.setCode(ResponseCode.SUCCESS);
            response.setRemark(null);
            return response;
        }), processors);
        server.start();
        return server;
    }

    static Object run(String[] a) throws Exception {
        switch (a[1]) {
            case "add": {
                Replica r = new Replica(replicas.size() + 1, a[2]);
                replicas.add(r);
                return map("replica", r.index, "address", r.address);
            }
            case "leader":
                if (replicas.isEmpty()) {
                    throw new IllegalStateException("add a replica first: it asks with its own client");
                }
                return updateControllerMetadata(replicas.get(0));
            case "register":
                return register(replica(a[2]));
            case "beat": {
                Replica r = replica(a[2]);
                if (a[3].equals("on")) {
                    r.sendHeartbeatToController(); // ReplicasManager.startBasicService beats once before electing
                    r.beating = true;
                } else {
                    r.beating = false;
                }
                return map("replica", r.index, "beating", r.beating, "lastBeat", r.lastBeatMillis, "at", System.currentTimeMillis());
            }
            case "elect":
                return brokerElect(replica(a[2]));
            // single requests with the fields given, for the controller's refusals
            case "nextid": // nextid BROKER_NAME
                return raw(replicas.get(0).invokeLeader(RemotingCommand.createRequestCommand(
                    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, new GetNextBrokerIdRequestHeader(clusterName, a[2]))));
            case "apply": { // apply REPLICA BROKER_ID [REGISTER_CHECK_CODE]: default its own, else a new one
                Replica r = replica(a[2]);
                String code = a.length > 4 ? a[4]
                    : r.registerCheckCode != null ? r.registerCheckCode : r.address + ";" + System.currentTimeMillis();
                return raw(r.invokeLeader(RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_APPLY_BROKER_ID,
                    new ApplyBrokerIdRequestHeader(clusterName, r.brokerName, Long.valueOf(a[3]), code))));
            }
            case "reg": { // reg REPLICA BROKER_ID
                Replica r = replica(a[2]);
                return raw(r.invokeLeader(RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_REGISTER_BROKER,
                    new RegisterBrokerToControllerRequestHeader(clusterName, r.brokerName, Long.valueOf(a[3]), r.address))));
            }
            case "electas": { // electas BROKER_NAME BROKER_ID: ElectMasterRequestHeader.ofBrokerTrigger
                return raw(replicas.get(0).invokeLeader(RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_ELECT_MASTER,
                    ElectMasterRequestHeader.ofBrokerTrigger(clusterName, a[2], Long.valueOf(a[3])))));
            }
            case "beatsync": { // beatsync REPLICA [noid]: one 904 as a request with an answer (brokers send it one-way)
                Replica r = replica(a[2]);
                BrokerHeartbeatRequestHeader header = new BrokerHeartbeatRequestHeader();
                header.setClusterName(clusterName);
                header.setBrokerAddr(r.address);
                header.setBrokerName(r.brokerName);
                header.setHeartbeatTimeoutMills(heartbeatTimeoutMillis);
                if (a.length < 4) {
                    header.setBrokerId(r.brokerControllerId);
                }
                return raw(r.invokeLeader(RemotingCommand.createRequestCommand(RequestCode.BROKER_HEARTBEAT, header)));
            }
            case "alteras": { // alteras BROKER_NAME MASTER_ID MASTER_EPOCH IDS SYNC_STATE_SET_EPOCH
                RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                    new AlterSyncStateSetRequestHeader(a[2], Long.valueOf(a[3]), Integer.parseInt(a[4])));
                request.setBody(new SyncStateSet(ids(a[5]), Integer.parseInt(a[6])).encode());
                return raw(replicas.get(0).invokeLeader(request));
            }
            case "alter":
                return alterSyncStateSet(replica(a[2]), ids(a[3]), a.length > 4 ? Integer.valueOf(a[4]) : null,
                    a.length > 5 ? Integer.valueOf(a[5]) : null);
            case "replicainfo":
                return getReplicaInfo(replicas.get(0), a[2]);
            case "syncstatedata":
                return getSyncStateData(replicas.get(0), Arrays.asList(a[2].split(",")));
            case "offset": {
                Replica r = replica(a[2]);
                synchronized (r) {
                    r.maxOffset = Long.parseLong(a[3]);
                    r.confirmOffset = r.maxOffset;
                }
                return r.state();
            }
            case "state":
                return replica(a[2]).state();
            case "states": {
                List<Object> out = new ArrayList<>();
                for (Replica r : replicas) {
                    out.add(r.state());
                }
                return map("replicas", out);
            }
            default:
                throw new IllegalArgumentException("unknown command " + a[1]);
        }
    }

    public static void main(String[] args) throws Exception {
        // BrokerDriver CONTROLLERS(;-separated) CLUSTER HEARTBEAT_INTERVAL_MS HEARTBEAT_TIMEOUT_MS
        controllers = Arrays.asList(args[0].split(";"));
        clusterName = args[1];
        heartbeatIntervalMillis = Long.parseLong(args[2]);
        heartbeatTimeoutMillis = Long.parseLong(args[3]);
        namesrv = startNamesrv();
        beater.scheduleAtFixedRate(() -> {
            for (Replica r : replicas) {
                if (r.beating) {
                    r.sendHeartbeatToController();
                }
            }
        }, heartbeatIntervalMillis, heartbeatIntervalMillis, TimeUnit.MILLISECONDS);
        emit(map("event", "ready", "namesrv", "127.0.0.1:" + namesrv.localListenPort(),
            "serializeType", RemotingCommand.getSerializeTypeConfigInThisServer().name()));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split("\\s+");
            if (a.length < 2) {
                continue;
            }
            if (a[1].equals("quit")) {
                break;
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("reply", a[0]);
            try {
                Object result = run(a);
                if (result instanceof Map) {
                    @SuppressWarnings("unchecked") Map<String, Object> m = (Map<String, Object>) result;
                    out.putAll(m);
                }
            } catch (Exception e) {
                out.put("error", e.toString());
            }
            emit(out);
        }
        emit(map("event", "bye"));
        Runtime.getRuntime().halt(0);
    }
}
