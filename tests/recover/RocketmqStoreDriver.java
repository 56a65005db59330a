/*
 * A RocketMQ producer for tests/recover/test_rocketmq_broker_store.py, compiled by the test against
 * RocketMQ's own client classes (../shared/rocketmq-broker/lib). Usage:
 *
 *   send NAMESRV BROKER_ADDR TOPIC COUNT
 *
 * sends COUNT messages of 600 to 3099 bytes (synchronously, no retry, so that none is stored twice) and
 * prints "sent I COMMITLOG_OFFSET QUEUE_ID QUEUE_OFFSET" for each (the offset decoded from the
 * SendResult's offsetMsgId, where the broker stored it), then "commitLogMaxOffset N", the broker's own
 * DefaultMessageStore.getMaxPhyOffset() from its runtime info (GET_BROKER_RUNTIME_INFO).
 */
import java.util.HashMap;

import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;

public class RocketmqStoreDriver {
    public static void main(String[] args) throws Exception {
        String namesrv = args[1], broker = args[2], topic = args[3];
        int count = Integer.parseInt(args[4]);
        DefaultMQProducer p = new DefaultMQProducer("mqctl_store_test");
        p.setNamesrvAddr(namesrv);
        p.setSendMsgTimeout(15000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        try {
            for (int i = 0; i < count; i++) {
                int len = 600 + (i * 977) % 2500;
                byte[] body = new byte[len];
                for (int j = 0; j < len; j++) {
                    body[j] = (byte) ('a' + (i + j) % 26);
                }
                SendResult r = p.send(new Message(topic, "tag", "key-" + i, body));
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    throw new IllegalStateException("message " + i + ": " + r);
                }
                long offset = MessageDecoder.decodeMessageId(r.getOffsetMsgId()).getOffset();
                System.out.println("sent " + i + " " + offset + " " + r.getMessageQueue().getQueueId() + " "
                    + r.getQueueOffset());
            }
            MQClientAPIImpl api = p.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
            HashMap<String, String> info = api.getBrokerRuntimeInfo(broker, 10000).getTable();
            System.out.println("commitLogMaxOffset " + info.get("commitLogMaxOffset"));
        } finally {
            p.shutdown();
        }
    }
}
