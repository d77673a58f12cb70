package org.rmqtx.cluster;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.BufferedOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The Apache 4.9.8 client as the cluster tests drive it: one line per event on stdout, until stdin closes.
 *
 *   produce NAMESRV TOPIC THREADS PREFIX PAUSE_MS   keyed sync sends: "ACK key broker queue offset" / "FAIL key error"
 *   consume NAMESRV TOPICS GROUP                    push consumer:    "MSG topic key broker queue offset", and
 *                                                   "QUEUES broker:queue ..." (its share of the first topic) on changes
 *
 * A consumer's listener holds while the test has written "pause" to stdin, until "resume".
 * Route polls and heartbeats every second (rebalance period: -Drocketmq.client.rebalance.waitInterval),
 * so the test sees a broker group leave and come back within seconds rather than the 30 s defaults.
 */
public final class ClusterClient {
    static final PrintStream OUT = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false);
    static final AtomicBoolean STOP = new AtomicBoolean();
    static final Object GATE = new Object();
    static boolean paused;

    static synchronized void emit(String line) {
        OUT.println(line);
    }

    static synchronized void flush() {
        OUT.flush();
    }

    public static void main(String[] args) throws Exception {
        Thread flusher = new Thread(() -> {
            while (!STOP.get()) {
                flush();
                try {
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        flusher.setDaemon(true);
        flusher.start();
        if ("produce".equals(args[0])) {
            produce(args[1], args[2], Integer.parseInt(args[3]), args[4], Long.parseLong(args[5]));
        } else if ("consume".equals(args[0])) {
            consume(args[1], args[2], args[3]);
        } else {
            throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        emit("DONE");
        flush();
        System.exit(0);
    }

    /** Reads "pause"/"resume" lines (a consumer holds its listener meanwhile) until the test closes our stdin. */
    static void awaitStdinClosed() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            synchronized (GATE) {
                paused = "pause".equals(line.trim());
                GATE.notifyAll();
            }
            emit(paused ? "PAUSED" : "RESUMED");
        }
        synchronized (GATE) {
            paused = false;
            GATE.notifyAll();
        }
        STOP.set(true);
    }

    static void passGate() throws InterruptedException {
        synchronized (GATE) {
            while (paused) {
                GATE.wait();
            }
        }
    }

    static void produce(String namesrv, String topic, int threads, String prefix, long pauseMs) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("P_cluster_" + prefix);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("producer-" + prefix);
        producer.setPollNameServerInterval(1000);
        producer.setHeartbeatBrokerInterval(1000);
        producer.start();
        emit("STARTED");
        List<Thread> senders = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int thread = t;
            Thread sender = new Thread(() -> {
                for (int i = 0; !STOP.get(); i++) {
                    String key = prefix + "-" + thread + "-" + i;
                    Message msg = new Message(topic, "TagA", key, key.getBytes(StandardCharsets.UTF_8));
                    try {
                        SendResult r = producer.send(msg);
                        MessageQueue mq = r.getMessageQueue();
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            emit("ACK " + key + " " + mq.getBrokerName() + " " + mq.getQueueId() + " " + r.getQueueOffset());
                        } else {
                            emit("FAIL " + key + " status:" + r.getSendStatus());
                        }
                    } catch (Exception e) {
                        emit("FAIL " + key + " " + e.getClass().getSimpleName() + ":" + String.valueOf(e.getMessage()).replace('\n', ' '));
                    }
                    try {
                        Thread.sleep(pauseMs);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            sender.start();
            senders.add(sender);
        }
        awaitStdinClosed();
        for (Thread sender : senders) {
            sender.join(10000);
        }
        producer.shutdown();
    }

    static void consume(String namesrv, String topic, String group) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("consumer-" + group + "-" + Long.toHexString(System.nanoTime()));
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        String[] topics = topic.split(",");
        for (String t : topics) {
            consumer.subscribe(t, "*");
        }
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            try {
                passGate();
            } catch (InterruptedException e) {
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
            MessageQueue mq = context.getMessageQueue();
            for (MessageExt m : msgs) {
                String key = m.getKeys() == null ? "-" : m.getKeys();
                emit("MSG " + m.getTopic() + " " + key + " " + mq.getBrokerName() + " " + mq.getQueueId() + " " + m.getQueueOffset());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        emit("STARTED");
        Thread watcher = new Thread(() -> {
            String last = null;
            while (!STOP.get()) {
                TreeSet<String> held = new TreeSet<>();
                for (MessageQueue mq : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
                    if (mq.getTopic().equals(topics[0])) {
                        held.add(mq.getBrokerName() + ":" + mq.getQueueId());
                    }
                }
                String now = "QUEUES " + String.join(" ", held);
                if (!now.equals(last)) {
                    emit(now);
                    last = now;
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        watcher.setDaemon(true);
        watcher.start();
        awaitStdinClosed();
        consumer.shutdown();
    }
}
