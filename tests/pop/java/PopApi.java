// The Apache RocketMQ 5.3.3 client's own POP calls (MQClientAPIImpl: popMessageAsync, ackMessageAsync,
// batchAckMessageAsync, changeInvisibleTimeAsync), which parse the broker's answers the way every 5.x
// remoting consumer does. Prints one JSON line per step.
// usage: java -cp CP PopApi.java NAMESRV BROKER_ADDR BROKER_NAME TOPIC GROUP
//   TOPIC has one queue; the program sends o0..o2 and u0..u2 itself.

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ChangeInvisibleTimeRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;

public class PopApi {
    static String addr, brokerName, topic, group;
    static MQClientAPIImpl api;

    static String quote(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static PopResult pop(boolean order, long invisibleMs, int max, long pollMs) throws Exception {
        PopMessageRequestHeader h = new PopMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(0);
        h.setMaxMsgNums(max);
        h.setInvisibleTime(invisibleMs);
        h.setPollTime(pollMs);
        h.setBornTime(System.currentTimeMillis());
        h.setInitMode(0);
        h.setExpType("TAG");
        h.setExp("*");
        h.setOrder(order);
        CompletableFuture<PopResult> f = new CompletableFuture<>();
        api.popMessageAsync(brokerName, addr, h, pollMs + 10000, new PopCallback() {
            public void onSuccess(PopResult r) { f.complete(r); }
            public void onException(Throwable e) { f.completeExceptionally(e); }
        });
        return f.get(pollMs + 15000, TimeUnit.MILLISECONDS);
    }

    static CompletableFuture<AckResult> ackFuture() {
        return new CompletableFuture<>();
    }

    static AckCallback callback(CompletableFuture<AckResult> f) {
        return new AckCallback() {
            public void onSuccess(AckResult r) { f.complete(r); }
            public void onException(Throwable e) { f.completeExceptionally(e); }
        };
    }

    static String realTopic(MessageExt m) {
        return ExtraInfoUtil.getRealTopic(ExtraInfoUtil.split(m.getProperty("POP_CK")), topic, group);
    }

    static AckResult ack(MessageExt m) throws Exception {
        String[] info = ExtraInfoUtil.split(m.getProperty("POP_CK"));
        AckMessageRequestHeader h = new AckMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(realTopic(m));
        h.setQueueId(ExtraInfoUtil.getQueueId(info));
        h.setOffset(ExtraInfoUtil.getQueueOffset(info));
        h.setExtraInfo(m.getProperty("POP_CK"));
        CompletableFuture<AckResult> f = ackFuture();
        api.ackMessageAsync(addr, 5000, callback(f), h);
        return f.get(10, TimeUnit.SECONDS);
    }

    static void print(String step, PopResult r) {
        StringBuilder b = new StringBuilder();
        b.append("{\"step\":").append(quote(step)).append(",\"status\":").append(quote(String.valueOf(r.getPopStatus()))).append(",\"msgs\":[");
        List<MessageExt> msgs = r.getMsgFoundList() == null ? new ArrayList<>() : r.getMsgFoundList();
        for (int i = 0; i < msgs.size(); i++) {
            MessageExt m = msgs.get(i);
            b.append(i == 0 ? "" : ",").append("{\"body\":").append(quote(new String(m.getBody())))
                .append(",\"reconsumeTimes\":").append(m.getReconsumeTimes())
                .append(",\"topic\":").append(quote(m.getTopic()))
                .append(",\"popCk\":").append(quote(m.getProperty("POP_CK"))).append("}");
        }
        System.out.println(b.append("]}"));
    }

    static void print(String step, AckResult r) {
        System.out.println("{\"step\":" + quote(step) + ",\"ack\":" + quote(String.valueOf(r.getStatus()))
            + ",\"extraInfo\":" + quote(r.getExtraInfo()) + "}");
    }

    public static void main(String[] argv) throws Exception {
        String namesrv = argv[0];
        addr = argv[1];
        brokerName = argv[2];
        topic = argv[3];
        group = argv[4];
        DefaultMQProducer producer = new DefaultMQProducer("PG_" + group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("popapi-" + System.nanoTime());
        producer.start();
        MessageQueue q0 = new MessageQueue(topic, brokerName, 0);
        for (String body : new String[] {"o0", "o1", "o2"}) {
            producer.send(new Message(topic, "TagA", body.getBytes()), q0);
        }
        api = producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();

        // orderly: locked until acked, the same two again after the invisible time with reconsumeTimes 1
        print("order-first", pop(true, 2000, 2, 0));
        print("order-locked", pop(true, 2000, 2, 0));
        Thread.sleep(2500);
        PopResult again = pop(true, 60000, 2, 0);
        print("order-again", again);
        for (MessageExt m : again.getMsgFoundList()) {
            print("order-ack", ack(m));
        }
        print("order-next", pop(true, 60000, 2, 1000));

        // unordered, on a fresh group: a batch ack of three, one invisible time changed, two never acked
        group = group + "_u";
        for (String body : new String[] {"u0", "u1", "u2"}) {
            producer.send(new Message(topic, "TagA", body.getBytes()), q0);
        }
        PopResult first = pop(false, 4000, 32, 0);
        print("unordered-first", first);
        List<String> extra = new ArrayList<>();
        MessageExt changed = null;
        for (MessageExt m : first.getMsgFoundList()) {
            String body = new String(m.getBody());
            if (body.startsWith("o")) {
                extra.add(m.getProperty("POP_CK"));
            } else if (body.equals("u0")) {
                changed = m;
            }
        }
        CompletableFuture<AckResult> batch = ackFuture();
        api.batchAckMessageAsync(addr, 5000, callback(batch), topic, group, extra);
        print("batch-ack", batch.get(10, TimeUnit.SECONDS));
        String[] info = ExtraInfoUtil.split(changed.getProperty("POP_CK"));
        ChangeInvisibleTimeRequestHeader ch = new ChangeInvisibleTimeRequestHeader();
        ch.setConsumerGroup(group);
        ch.setTopic(realTopic(changed));
        ch.setQueueId(ExtraInfoUtil.getQueueId(info));
        ch.setOffset(ExtraInfoUtil.getQueueOffset(info));
        ch.setExtraInfo(changed.getProperty("POP_CK"));
        ch.setInvisibleTime(1000L);
        CompletableFuture<AckResult> cf = ackFuture();
        api.changeInvisibleTimeAsync(brokerName, addr, ch, 5000, callback(cf));
        print("change-invisible", cf.get(10, TimeUnit.SECONDS));
        // u0 after 1 s (changed), u1 and u2 after 4 s (never acked); the batch-acked ones never
        long deadline = System.currentTimeMillis() + 25000;
        int back = 0;
        while (back < 3 && System.currentTimeMillis() < deadline) {
            PopResult r = pop(false, 60000, 32, 3000);
            if (r.getMsgFoundList() != null && !r.getMsgFoundList().isEmpty()) {
                print("unordered-back", r);
                for (MessageExt m : r.getMsgFoundList()) {
                    back++;
                    print("retry-ack", ack(m));
                }
            }
        }
        Thread.sleep(1000);
        print("unordered-after", pop(false, 60000, 32, 1500));
        producer.shutdown();
        System.exit(0);
    }
}
