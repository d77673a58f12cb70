import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.List;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs many mqadmin subcommands in one JVM, one after another, for tests/admin/test_mqadmin_java.py
 * (rocketmq-tools 4.9.8) and tests/admin/test_mqadmin5_java.py (5.5.0): a JVM start costs about a second
 * of CPU, a subcommand against a local broker a few milliseconds.
 *
 * stdin: one subcommand per line, its arguments separated by tabs. stdout: one JSON object per
 * subcommand, {"out": what it printed, "err": what it printed to stderr, "exit": a System.exit status or
 * null, "ms": how long it took}. Each subcommand runs through MQAdminStartup.main0, as the mqadmin script's JVM would.
 *
 * It compiles against both versions' classpaths: it names no class beyond MQAdminStartup.main0 (the same
 * in both), writes its JSON itself (4.9.8 has fastjson, 5.5.0 fastjson2), finds the client's
 * ServiceThread by simple name (4.9.8's remoting has its own, org.apache.rocketmq.remoting.common) and
 * the subcommand list by type (4.9.8's subCommandList, 5.5.0's SUB_COMMANDS).
 *
 * State a subcommand leaves in the JVM: main0 appends new subcommand objects to that static list on
 * every call but runs the first that matches, and some keep a client in a field, made once, shut down at
 * their end (brokerConsumeStats, queryMsgByUniqueKey, sendMessage, consumeMessage): run again, they
 * used the dead client ("executor not accepting a task" under RemotingConnectException). So the list is
 * emptied before each subcommand and main0 makes fresh objects, as in a JVM of its own. What else
 * stays is set again by each run: the name server address property (from -n), checkMsgSendRT's static
 * broker name and queue id (set by each send before they are printed). Each client a subcommand starts
 * is shut down, and dropped from MQClientManager, before it returns.
 */
public class MQAdminBatch {
    /** mqadmin calls System.exit on a bad command line; that ends only the subcommand here. */
    static final class ExitCalled extends SecurityException {
        final int status;

        ExitCalled(int status) {
            super("System.exit(" + status + ")");
            this.status = status;
        }
    }

    /** The status of the last System.exit call (main0 catches the exception that stops it). */
    static volatile Integer exitStatus;

    /**
     * Each subcommand ends with the client's shutdown, which joins its NettyEventExecutor thread; that
     * thread waits for events in 3 s polls and sees the stop only when a poll ends, so a shutdown took up
     * to 3 s (a mqadmin JVM of its own pays the same before it exits). While the main thread is in that
     * join, this daemon interrupts the executor's poll: its loop catches the interruption and ends.
     */
    static void startShutdownNudger(Thread main) {
        Thread nudger = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
                boolean joining = false;
                for (StackTraceElement frame : main.getStackTrace()) {
                    // org.apache.rocketmq.common.ServiceThread (5.x), org.apache.rocketmq.remoting.common.ServiceThread (4.9.8)
                    if (frame.getClassName().endsWith(".ServiceThread") && frame.getMethodName().equals("shutdown")) {
                        joining = true;
                        break;
                    }
                }
                if (joining) {
                    for (Thread t : Thread.getAllStackTraces().keySet()) {
                        if (t.getName().equals("NettyEventExecutor")) {
                            t.interrupt();
                        }
                    }
                }
            }
        }, "shutdown-nudger");
        nudger.setDaemon(true);
        nudger.start();
    }

    /** MQAdminStartup's static list of subcommand objects. */
    @SuppressWarnings("unchecked")
    static List<Object> subCommands() throws IllegalAccessException {
        for (Field f : MQAdminStartup.class.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && List.class.isAssignableFrom(f.getType())) {
                f.setAccessible(true);
                return (List<Object>) f.get(null);
            }
        }
        throw new IllegalStateException("MQAdminStartup has no static subcommand list");
    }

    /** A JSON string, ASCII only (whatever the JVM's stdout encoding, the reader gets the same text). */
    static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 16).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c == '\n') {
                b.append("\\n");
            } else if (c == '\t') {
                b.append("\\t");
            } else if (c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    @SuppressWarnings("removal")
    public static void main(String[] args) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(Permission perm) {
            }

            @Override
            public void checkExit(int status) {
                exitStatus = status;
                throw new ExitCalled(status);
            }
        });
        startShutdownNudger(Thread.currentThread());
        List<Object> subCommands = subCommands();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            exitStatus = null;
            long began = System.nanoTime();
            System.setOut(new PrintStream(out, true, "UTF-8"));
            System.setErr(new PrintStream(err, true, "UTF-8"));
            try {
                subCommands.clear();  // main0 fills it again with fresh objects
                MQAdminStartup.main0(line.split("\t", -1), null);
            } catch (ExitCalled e) {
                // recorded in exitStatus
            } catch (Throwable t) {
                t.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            realOut.println("{\"out\":" + quote(out.toString("UTF-8")) + ",\"err\":" + quote(err.toString("UTF-8"))
                    + ",\"exit\":" + exitStatus + ",\"ms\":" + (System.nanoTime() - began) / 1_000_000 + "}");
            realOut.flush();
        }
        System.setSecurityManager(null);
        // the clients' netty threads would keep the JVM up for their graceful shutdown
        Runtime.getRuntime().halt(0);
    }
}
