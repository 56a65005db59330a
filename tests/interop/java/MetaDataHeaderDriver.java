/*
 * CONTROLLER_GET_METADATA_INFO (1005) answers as RocketMQ's controllers build them, from RocketMQ's own
 * classes (compiled unchanged in ../shared/rocketmq-java/lib), for tests/remoting/test_metadata_peers.py.
 *
 * DLedgerController.getControllerMetadata: peers is `id + ":" + address + ";"` per member of the DLedger
 * peer map, controllerLeaderId the leader's DLedger id, controllerLeaderAddress its address.
 * JRaftController.getControllerMetadata: peers is the controller RPC address of each peer of the
 * initial configuration followed by ";", controllerLeaderId the leader's PeerId (its Raft endpoint),
 * controllerLeaderAddress the leader's RPC address.
 * Both answer RemotingCommand.createResponseCommandWithHeader(SUCCESS, new GetMetaDataResponseHeader(
 * group, leaderId, leaderAddress, isLeader, peers)).
 *
 * Usage: MetaDataHeaderDriver JSON|ROCKETMQ group leaderId leaderAddress isLeader peers
 * Prints the frame RemotingCommand.encode() writes (with its length prefix), in hex, on stdout.
 */

import java.nio.ByteBuffer;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.SerializeType;
import org.apache.rocketmq.remoting.protocol.header.controller.GetMetaDataResponseHeader;

public class MetaDataHeaderDriver {
    public static void main(String[] args) throws Exception {
        RemotingCommand response = RemotingCommand.createResponseCommandWithHeader(ResponseCode.SUCCESS,
            new GetMetaDataResponseHeader(args[1], args[2], args[3], Boolean.parseBoolean(args[4]), args[5]));
        response.setSerializeTypeCurrentRPC(SerializeType.valueOf(args[0]));
        response.setOpaque(7);
        ByteBuffer frame = response.encode();
        StringBuilder hex = new StringBuilder();
        while (frame.hasRemaining()) {
            hex.append(String.format("%02x", frame.get() & 0xff));
        }
        System.out.println(hex);
    }
}
