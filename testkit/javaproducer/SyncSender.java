import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * SYNC sends in a loop with Apache's DefaultMQProducer until its stdin closes. One line per send on stdout:
 *   ok   BEGAN_MS DONE_MS BODY MSG_ID QUEUE_ID QUEUE_OFFSET BROKER
 *   fail BEGAN_MS DONE_MS BODY WHAT
 * (times are System.currentTimeMillis(); WHAT is the send status or the exception, spaces removed).
 * Args: NAMESRV TOPIC [PRODUCER_GROUP].
 */
public final class SyncSender {
    private static volatile boolean running = true;

    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.length > 2 ? args[2] : "rmqtx-failover-java");
        producer.setNamesrvAddr(args[0]);
        producer.setPollNameServerInterval(1000);
        producer.setSendMsgTimeout(3000);
        producer.start();
        Thread watcher = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                while (in.readLine() != null) {
                    // any line is ignored; end of input stops the loop
                }
            } catch (Exception ignored) {
                // a broken stdin stops the loop too
            }
            running = false;
        });
        watcher.setDaemon(true);
        watcher.start();
        System.out.println("started");
        System.out.flush();
        long i = 0;
        while (running) {
            String body = "failover-" + i++;
            long began = System.currentTimeMillis();
            try {
                SendResult r = producer.send(new Message(args[1], body.getBytes(StandardCharsets.UTF_8)));
                long done = System.currentTimeMillis();
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    System.out.println("ok " + began + " " + done + " " + body + " " + r.getMsgId() + " "
                        + r.getMessageQueue().getQueueId() + " " + r.getQueueOffset() + " "
                        + r.getMessageQueue().getBrokerName());
                } else {
                    System.out.println("fail " + began + " " + done + " " + body + " " + r.getSendStatus());
                }
            } catch (Exception e) {
                long done = System.currentTimeMillis();
                String what = e.getClass().getSimpleName() + ":" + String.valueOf(e.getMessage());
                what = what.replaceAll("\\s+", "_");
                if (what.length() > 200) {
                    what = what.substring(0, 200);
                }
                System.out.println("fail " + began + " " + done + " " + body + " " + what);
                Thread.sleep(50);
            }
            System.out.flush();
        }
        producer.shutdown();
        System.out.println("stopped");
        System.out.flush();
    }
}
