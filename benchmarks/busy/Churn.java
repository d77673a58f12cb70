import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A bounded multi-threaded JVM workload for benchmark busy cells, standing in for a build or a JVM test
 * suite beside a broker: each thread allocates short-lived maps and strings (young-generation garbage,
 * so the collector's threads run too) and hashes them, busy for {@code busyMs} then idle for
 * {@code idleMs}, until killed. Usage: {@code java Churn.java THREADS BUSY_MS IDLE_MS}.
 */
public class Churn {
    public static void main(String[] args) throws InterruptedException {
        int threads = Integer.parseInt(args[0]);
        long busyMs = Long.parseLong(args[1]);
        long idleMs = Long.parseLong(args[2]);
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> work(busyMs, idleMs), "churn-" + i);
            t.setDaemon(true);
            t.start();
            workers.add(t);
        }
        for (Thread t : workers) {
            t.join();
        }
    }

    private static void work(long busyMs, long idleMs) {
        long sink = 0;
        while (true) {
            long until = System.nanoTime() + busyMs * 1_000_000L;
            while (System.nanoTime() < until) {
                Map<String, Integer> map = new HashMap<>();
                for (int k = 0; k < 512; k++) {
                    map.put("key-" + k + "-" + sink, k);
                }
                sink += map.hashCode();
            }
            if (idleMs > 0) {
                try {
                    Thread.sleep(idleMs);
                } catch (InterruptedException e) {
                    return;
                }
            }
            if (sink == 42) {
                System.out.println(sink);
            }
        }
    }
}
