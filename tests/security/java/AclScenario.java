// One ACL scenario step with the Apache RocketMQ 4.9.8 Java client; prints one JSON line per result.
// usage: java -cp CP AclScenario.java NAMESRV STEP...   (one JVM for all steps: each start costs seconds)
//   STEP = AK,SK,OP,ARG1,ARG2 with AK/SK "-" for no credentials; OP is one of
//   send,TOPIC,COUNT | pull,TOPIC,GROUP | createTopic,BROKER,TOPIC

import java.util.Set;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class AclScenario {
    static String quote(String s) {
        if (s == null) return "null";
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    static void error(String op, Throwable e) {
        Throwable t = e;
        while (t != null && !(t instanceof MQBrokerException)) t = t.getCause();
        if (t instanceof MQBrokerException) {
            MQBrokerException b = (MQBrokerException) t;
            System.out.println("{\"op\":" + quote(op) + ",\"ok\":false,\"code\":" + b.getResponseCode()
                + ",\"remark\":" + quote(b.getErrorMessage()) + "}");
        } else {
            System.out.println("{\"op\":" + quote(op) + ",\"ok\":false,\"code\":-1,\"remark\":" + quote(String.valueOf(e)) + "}");
        }
    }

    public static void main(String[] argv) throws Exception {
        for (int s = 1; s < argv.length; s++) {
            String[] step = argv[s].split(",");
            String[] args = new String[step.length + 1];
            args[0] = argv[0];
            System.arraycopy(step, 0, args, 1, step.length);
            step(args);
        }
        System.exit(0);
    }

    static void step(String[] args) throws Exception {
        String namesrv = args[0];
        RPCHook hook = "-".equals(args[1]) ? null : new AclClientRPCHook(new SessionCredentials(args[1], args[2]));
        String op = args[3];
        if (op.equals("send")) {
            DefaultMQProducer producer = new DefaultMQProducer("PG_ACL", hook);
            producer.setNamesrvAddr(namesrv);
            producer.setInstanceName("acl-" + System.nanoTime());
            producer.setRetryTimesWhenSendFailed(0);
            producer.setSendMsgTimeout(15000);  // the first send loads classes and connects: slow on a busy machine
            producer.start();
            int count = Integer.parseInt(args[5]);
            for (int i = 0; i < count; i++) {
                try {
                    SendResult r = producer.send(new Message(args[4], "TagA", ("acl " + i).getBytes("UTF-8")));
                    System.out.println("{\"op\":\"send\",\"ok\":true,\"status\":" + quote(r.getSendStatus().name()) + "}");
                } catch (Exception e) {
                    error("send", e);
                }
            }
            producer.shutdown();
        } else if (op.equals("pull")) {
            DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(args[5], hook);
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName("acl-" + System.nanoTime());
            consumer.start();
            int total = 0;
            try {
                Set<MessageQueue> mqs = consumer.fetchSubscribeMessageQueues(args[4]);
                for (MessageQueue mq : mqs) {
                    PullResult r = consumer.pull(mq, "*", 0, 32);
                    if (r.getMsgFoundList() != null) total += r.getMsgFoundList().size();
                }
                System.out.println("{\"op\":\"pull\",\"ok\":true,\"count\":" + total + "}");
            } catch (Exception e) {
                error("pull", e);
            }
            consumer.shutdown();
        } else if (op.equals("createTopic")) {
            DefaultMQAdminExt admin = new DefaultMQAdminExt(hook, 5000);
            admin.setNamesrvAddr(namesrv);
            admin.setInstanceName("acl-" + System.nanoTime());
            admin.start();
            try {
                TopicConfig tc = new TopicConfig(args[5], 4, 4, 6);
                admin.createAndUpdateTopicConfig(args[4], tc);
                System.out.println("{\"op\":\"createTopic\",\"ok\":true}");
            } catch (Exception e) {
                error("createTopic", e);
            }
            admin.shutdown();
        }
    }
}
