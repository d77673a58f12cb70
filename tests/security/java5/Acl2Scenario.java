import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * ACL 2.0 with Apache 5.4.0's own tools: mqadmin's user and ACL subcommands (signed by the super user)
 * and DefaultMQProducer sends signed by AclClientRPCHook. One JSON line per step on stdout.
 * usage: Acl2Scenario NAMESRV BROKER SUPER_USER SUPER_PASSWORD
 */
public class Acl2Scenario {
    static String namesrv;
    static String broker;

    static RPCHook hook(String user, String password) {
        return new AclClientRPCHook(new SessionCredentials(user, password));
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static void admin(String label, RPCHook hook, String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        ByteArrayOutputStream errors = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true));
        System.setErr(new PrintStream(errors, true));
        try {
            String[] full = new String[args.length + 2];
            System.arraycopy(args, 0, full, 0, args.length);
            full[args.length] = "-n";
            full[args.length + 1] = namesrv;
            MQAdminStartup.main0(full, hook);
        } finally {
            System.setOut(out);
            System.setErr(err);
        }
        String problem = "";
        for (String line : errors.toString().split("\n")) {
            if (line.contains("CODE:")) {
                problem = line.substring(line.indexOf("CODE:"));
                break;
            }
        }
        System.out.println("{\"step\":" + json(label) + ",\"out\":" + json(captured.toString()) + ",\"error\":" + json(problem) + "}");
    }

    static void send(String label, RPCHook hook, String topic) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("PG_" + label.replaceAll("[^A-Za-z0-9]", "_"), hook);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(label.replaceAll("[^A-Za-z0-9]", "_"));
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        String result;
        try {
            SendResult r = null;
            for (int i = 0; ; i++) {  // a topic made a moment ago may not be routed yet
                try {
                    r = producer.send(new Message(topic, "hello".getBytes(StandardCharsets.UTF_8)));
                    break;
                } catch (org.apache.rocketmq.client.exception.MQClientException e) {
                    if (i > 40 || e.getMessage() == null || !e.getMessage().contains("No route info")) {
                        throw e;
                    }
                    Thread.sleep(250);
                }
            }
            result = "\"ok\":true,\"status\":" + json(r.getSendStatus().name());
        } catch (Exception e) {
            Throwable t = e;
            while (t != null && !(t instanceof MQBrokerException)) {
                t = t.getCause();
            }
            if (t == null) {
                result = "\"ok\":false,\"code\":-1,\"remark\":" + json(e.toString());
            } else {
                MQBrokerException b = (MQBrokerException) t;
                result = "\"ok\":false,\"code\":" + b.getResponseCode() + ",\"remark\":" + json(b.getErrorMessage());
            }
        } finally {
            producer.shutdown();
        }
        System.out.println("{\"step\":" + json(label) + "," + result + "}");
    }

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        broker = args[1];
        RPCHook su = hook(args[2], args[3]);
        RPCHook alice = hook("jalice", "alice-pw-1");
        String b = broker;
        admin("super creates a topic", su, "updateTopic", "-b", b, "-t", "JTopicAllowed");
        admin("topic 2", su, "updateTopic", "-b", b, "-t", "JTopicDenied");
        admin("topic 3", su, "updateTopic", "-b", b, "-t", "JTopicNoPolicy");
        admin("createUser alice", su, "createUser", "-b", b, "-u", "jalice", "-p", "alice-pw-1", "-t", "Normal");
        admin("createUser bob", su, "createUser", "-b", b, "-u", "jbob", "-p", "bob-pw-1");
        admin("createUser alice again", su, "createUser", "-b", b, "-u", "jalice", "-p", "x");
        admin("getUser alice", su, "getUser", "-b", b, "-u", "jalice");
        admin("listUser", su, "listUser", "-b", b);
        admin("createAcl allowed", su, "createAcl", "-b", b, "-s", "User:jalice", "-r", "Topic:JTopicAllowed", "-a", "Pub", "-d", "Allow");
        admin("createAcl denied", su, "createAcl", "-b", b, "-s", "User:jalice", "-r", "Topic:JTopicDenied", "-a", "Pub", "-d", "Deny");
        admin("updateAcl group", su, "updateAcl", "-b", b, "-s", "User:jalice", "-r", "Group:G*,Group:H1", "-a", "Sub,Get", "-d", "Allow", "-i", "127.0.0.1,10.0.0.0/8");
        admin("createAcl bob", su, "createAcl", "-b", b, "-s", "User:jbob", "-r", "Topic:JTopicAllowed", "-a", "Pub", "-d", "Allow");
        admin("getAcl alice", su, "getAcl", "-b", b, "-s", "User:jalice");
        admin("listAcl", su, "listAcl", "-b", b);
        admin("listAcl filtered", su, "listAcl", "-b", b, "-s", "jalice", "-r", "Group");
        admin("normal user creates a topic", alice, "updateTopic", "-b", b, "-t", "JTopicByAlice");
        admin("normal user lists users", alice, "listUser", "-b", b);
        send("no credentials", null, "JTopicAllowed");
        send("wrong password", hook("jalice", "wrong"), "JTopicAllowed");
        send("unknown user", hook("ghost", "whatever"), "JTopicAllowed");
        send("denied topic", alice, "JTopicDenied");
        send("topic with no policy", alice, "JTopicNoPolicy");
        send("allowed send", alice, "JTopicAllowed");
        admin("updateUser bob disable", su, "updateUser", "-b", b, "-u", "jbob", "-s", "disable");
        send("disabled user", hook("jbob", "bob-pw-1"), "JTopicAllowed");
        admin("deleteAcl entry", su, "deleteAcl", "-b", b, "-s", "User:jalice", "-r", "Topic:JTopicDenied");
        admin("getAcl after delete", su, "getAcl", "-b", b, "-s", "User:jalice");
        admin("deleteUser bob", su, "deleteUser", "-b", b, "-u", "jbob");
        admin("listUser after delete", su, "listUser", "-b", b);
        admin("getAcl deleted user", su, "getAcl", "-b", b, "-s", "User:jbob");
    }
}
