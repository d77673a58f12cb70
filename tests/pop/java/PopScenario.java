// A DefaultMQPushConsumer of the Apache RocketMQ 5.3.3 remoting client in POP mode (client rebalance
// off: the broker assigns the queues and says POP); prints one JSON line per message consumed.
// usage: java -cp CP PopScenario.java NAMESRV TOPIC GROUP EXPECTED SECONDS
//   bodies starting with "fail" are refused once (RECONSUME_LATER: the client changes their
//   invisible time), everything else is acked; exits 0 once EXPECTED distinct bodies were acked.

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.message.MessageExt;

public class PopScenario {
    static String quote(String s) {
        if (s == null) return "null";
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    public static void main(String[] argv) throws Exception {
        String namesrv = argv[0], topic = argv[1], group = argv[2];
        int expected = Integer.parseInt(argv[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(argv[4]) * 1000L;
        Set<String> acked = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("pop-" + System.nanoTime());
        consumer.setClientRebalance(false);
        consumer.setPopInvisibleTime(20000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            boolean refuse = false;
            for (MessageExt m : msgs) {
                String body = new String(m.getBody());
                boolean fail = body.startsWith("fail") && m.getReconsumeTimes() == 0;
                refuse |= fail;
                synchronized (System.out) {
                    System.out.println("{\"body\":" + quote(body) + ",\"topic\":" + quote(m.getTopic())
                        + ",\"reconsumeTimes\":" + m.getReconsumeTimes() + ",\"queueId\":" + m.getQueueId()
                        + ",\"popCk\":" + quote(m.getProperty("POP_CK")) + ",\"refused\":" + fail + "}");
                    System.out.flush();
                }
            }
            if (refuse) return ConsumeConcurrentlyStatus.RECONSUME_LATER;  // one message per call
            for (MessageExt m : msgs) acked.add(new String(m.getBody()));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.setConsumeMessageBatchMaxSize(1);
        consumer.start();
        while (acked.size() < expected && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(1500);  // let the last acks reach the broker
        consumer.shutdown();
        System.out.println("{\"done\":" + (acked.size() >= expected) + ",\"acked\":" + acked.size() + "}");
        System.exit(acked.size() >= expected ? 0 : 1);
    }
}
