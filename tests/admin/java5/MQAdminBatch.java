import com.alibaba.fastjson2.JSON;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs many mqadmin subcommands in one JVM, one after another, for tests/admin/test_mqadmin5_java.py:
 * a JVM start costs about a second of CPU, a subcommand against a local broker a few milliseconds.
 *
 * stdin: one subcommand per line, its arguments separated by tabs. stdout: one JSON object per
 * subcommand, {"out": what it printed, "err": what it printed to stderr, "exit": a System.exit status or
 * null, "ms": how long it took}. Each subcommand runs through MQAdminStartup.main0, as the mqadmin script's JVM would.
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
                    if (frame.getClassName().equals("org.apache.rocketmq.common.ServiceThread") && frame.getMethodName().equals("shutdown")) {
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
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("out", out.toString("UTF-8"));
            result.put("err", err.toString("UTF-8"));
            result.put("exit", exitStatus);
            result.put("ms", (System.nanoTime() - began) / 1_000_000);
            realOut.println(JSON.toJSONString(result));
            realOut.flush();
        }
        System.setSecurityManager(null);
        // the clients' netty threads would keep the JVM up for their graceful shutdown
        Runtime.getRuntime().halt(0);
    }
}
