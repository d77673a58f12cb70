package org.rmqtx.interop;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The java5grpc driver: rocketmq-client-java (the 5.x gRPC SDK) as a producer, and with op "consume"
 * as SimpleConsumers (with "fifo", a message group with an un-acked message in a batch has the rest of
 * it in that batch held, as an orderly consumer does); op "crowd" is "consume" with "producers" Producers sending
 * at once while the SimpleConsumers receive. Reads the same JSON params as interop/py5/driver.py on stdin and prints the same
 * events (one JSON object per line).
 */
public final class Grpc5 {
    private static final Gson GSON = new Gson();

    private Grpc5() {
    }

    static synchronized void emit(String event, Map<String, Object> fields) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("event", event);
        out.put("at", System.currentTimeMillis() / 1000.0);
        out.putAll(fields);
        System.out.println(GSON.toJson(out));
        System.out.flush();
    }

    static Map<String, Object> fields(Object... pairs) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            out.put((String) pairs[i], pairs[i + 1]);
        }
        return out;
    }

    static String text(JsonObject o, String key) {
        JsonElement e = o.get(key);
        return e == null || e.isJsonNull() ? null : e.getAsString();
    }

    static Message build(ClientServiceProvider provider, JsonObject spec, String topic) {
        MessageBuilder b = provider.newMessageBuilder().setTopic(topic);
        String b64 = text(spec, "body_b64");
        b.setBody(b64 != null ? Base64.getDecoder().decode(b64) : text(spec, "body").getBytes(StandardCharsets.UTF_8));
        if (text(spec, "tag") != null) {
            b.setTag(text(spec, "tag"));
        }
        JsonArray keys = spec.has("keys") ? spec.getAsJsonArray("keys") : new JsonArray();
        if (keys.size() > 0) {
            String[] all = new String[keys.size()];
            for (int i = 0; i < all.length; i++) {
                all[i] = keys.get(i).getAsString();
            }
            b.setKeys(all);
        }
        if (spec.has("props")) {
            for (Map.Entry<String, JsonElement> e : spec.getAsJsonObject("props").entrySet()) {
                b.addProperty(e.getKey(), e.getValue().getAsString());
            }
        }
        if (text(spec, "group") != null) {
            b.setMessageGroup(text(spec, "group"));
        }
        if (spec.has("delay_s")) {
            b.setDeliveryTimestamp(System.currentTimeMillis() + (long) (spec.get("delay_s").getAsDouble() * 1000));
        }
        return b.build();
    }

    static double num(JsonObject o, String key, double fallback) {
        return o.has(key) && !o.get(key).isJsonNull() ? o.get(key).getAsDouble() : fallback;
    }

    /** Op "consume": members SimpleConsumers receive until "expect" bodies are acked, then linger. */
    static int consume(JsonObject params, ClientServiceProvider provider, ClientConfiguration config) throws Exception {
        String topic = text(params, "topic");
        boolean sql = "SQL92".equals(text(params, "expression_type"));
        String tag = text(params, "tag") == null ? "*" : text(params, "tag");
        FilterExpression expression = new FilterExpression(tag, sql ? FilterExpressionType.SQL92 : FilterExpressionType.TAG);
        Map<String, String> actions = new HashMap<>();
        if (params.has("actions")) {
            for (Map.Entry<String, JsonElement> e : params.getAsJsonObject("actions").entrySet()) {
                actions.put(e.getKey(), e.getValue().getAsString());
            }
        }
        int expect = params.get("expect").getAsInt();
        int members = (int) num(params, "members", 1);
        long invisible = (long) num(params, "invisible", 10);
        int batch = (int) num(params, "batch", 16);
        boolean fifo = params.has("fifo") && params.get("fifo").getAsBoolean();
        long deadline = System.currentTimeMillis() + (long) (num(params, "wait", 30) * 1000);
        long linger = (long) (num(params, "linger", 0) * 1000);
        Map<String, Integer> seen = new HashMap<>();
        Set<String> acked = new HashSet<>();
        AtomicBoolean done = new AtomicBoolean(expect == 0);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        List<SimpleConsumer> consumers = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            consumers.add(provider.newSimpleConsumerBuilder().setClientConfiguration(config)
                .setConsumerGroup(text(params, "group")).setAwaitDuration(Duration.ofSeconds((long) num(params, "await", 2)))
                .setSubscriptionExpressions(Collections.singletonMap(topic, expression)).build());
        }
        emit("started", fields());
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            final int member = i;
            final SimpleConsumer consumer = consumers.get(i);
            Thread t = new Thread(() -> {
                long lingerEnd = Long.MAX_VALUE;
                try {
                    while (System.currentTimeMillis() < deadline) {
                        if (done.get()) {
                            lingerEnd = Math.min(lingerEnd, System.currentTimeMillis() + linger);
                            if (System.currentTimeMillis() >= lingerEnd) {
                                return;
                            }
                        }
                        Set<String> held = new HashSet<>(); // fifo: groups with an un-acked message in this batch
                        for (MessageView view : consumer.receive(batch, Duration.ofSeconds(invisible))) {
                            ByteBuffer buffer = view.getBody();
                            byte[] bytes = new byte[buffer.remaining()];
                            buffer.get(bytes);
                            String body = new String(bytes, StandardCharsets.UTF_8).split("#", 2)[0];
                            String messageGroup = view.getMessageGroup().orElse(null);
                            if (fifo && messageGroup != null && held.contains(messageGroup)) {
                                emit("held", fields("member", member, "body", body, "attempt", view.getDeliveryAttempt(),
                                    "message_group", messageGroup));
                                continue;
                            }
                            int count;
                            synchronized (seen) {
                                count = seen.merge(body, 1, Integer::sum);
                            }
                            emit("recv", fields("member", member, "body", body, "msg_id", view.getMessageId().toString(),
                                "attempt", view.getDeliveryAttempt(), "tag", view.getTag().orElse(null),
                                "keys", new TreeSet<>(view.getKeys()), "topic", view.getTopic(),
                                "props", view.getProperties(), "size", bytes.length,
                                "message_group", messageGroup));
                            String action = actions.getOrDefault(body, "ack");
                            if ((count == 1 && "skip_once".equals(action)) || "skip_always".equals(action)) {
                                if (fifo && messageGroup != null) {
                                    held.add(messageGroup);
                                }
                                continue;
                            }
                            consumer.ack(view);
                            synchronized (seen) {
                                acked.add(body);
                                if (acked.size() >= expect) {
                                    done.set(true);
                                }
                            }
                            emit("acked", fields("member", member, "body", body, "msg_id", view.getMessageId().toString()));
                        }
                    }
                } catch (Exception e) {
                    failures.add("member " + member + ": " + e.getClass().getSimpleName() + ": " + e.getMessage());
                }
            });
            threads.add(t);
            t.start();
        }
        if (num(params, "producers", 0) > 0) {
            failures.addAll(sendTogether(params, provider, config));
        }
        for (Thread t : threads) {
            t.join();
        }
        for (SimpleConsumer consumer : consumers) {
            consumer.close();
        }
        for (String failure : failures) {
            emit("error", fields("error", failure));
        }
        return failures.isEmpty() ? 0 : 1;
    }

    /**
     * Op "crowd"'s producers: "producers" Producer instances, started together, each sending its own specs
     * ("producer": its index) in order, all at once; "sent" events carry "producer". Returns the failures.
     */
    static List<String> sendTogether(JsonObject params, ClientServiceProvider provider, ClientConfiguration config)
        throws InterruptedException {
        String topic = text(params, "topic");
        int count = (int) num(params, "producers", 0);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch started = new CountDownLatch(count);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            final int index = i;
            Thread t = new Thread(() -> {
                Producer producer = null;
                try {
                    producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build();
                } catch (Exception e) {
                    failures.add("producer " + index + ": start: " + describe(e));
                } finally {
                    started.countDown();
                }
                if (producer == null) {
                    return;
                }
                try {
                    if (!started.await(30, TimeUnit.SECONDS)) {
                        failures.add("producer " + index + ": the other producers did not start within 30 s");
                    }
                    for (JsonElement m : params.getAsJsonArray("messages")) {
                        JsonObject spec = m.getAsJsonObject();
                        if ((int) num(spec, "producer", -1) != index) {
                            continue;
                        }
                        double at = System.currentTimeMillis() / 1000.0;
                        SendReceipt receipt = producer.send(build(provider, spec, topic));
                        emit("sent", fields("producer", index, "body", text(spec, "body"), "at", at,
                            "msg_id", receipt.getMessageId().toString(), "offset", null));
                    }
                } catch (Exception e) {
                    failures.add("producer " + index + ": " + describe(e));
                } finally {
                    try {
                        producer.close();
                    } catch (Exception e) {
                        failures.add("producer " + index + ": close: " + describe(e));
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        return failures;
    }

    /** Op "push": a PushConsumer failing fail_once bodies once and fail_always bodies every time. */
    static int push(JsonObject params, ClientServiceProvider provider, ClientConfiguration config) throws Exception {
        Set<String> failOnce = new HashSet<>();
        Set<String> failAlways = new HashSet<>();
        for (String key : new String[] {"fail_once", "fail_always"}) {
            if (params.has(key)) {
                for (JsonElement e : params.getAsJsonArray(key)) {
                    ("fail_once".equals(key) ? failOnce : failAlways).add(e.getAsString());
                }
            }
        }
        int attempts = (int) num(params, "attempts", 0);
        int expect = params.get("expect").getAsInt();
        Map<String, Integer> seen = new HashMap<>();
        Set<String> consumed = new HashSet<>();
        CountDownLatch done = new CountDownLatch(1);
        FilterExpression all = new FilterExpression("*", FilterExpressionType.TAG);
        PushConsumer consumer = provider.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(text(params, "group"))
            .setSubscriptionExpressions(Collections.singletonMap(text(params, "topic"), all))
            .setMessageListener(view -> {
                ByteBuffer buffer = view.getBody();
                byte[] bytes = new byte[buffer.remaining()];
                buffer.get(bytes);
                String body = new String(bytes, StandardCharsets.UTF_8).split("#", 2)[0];
                int count;
                synchronized (seen) {
                    count = seen.merge(body, 1, Integer::sum);
                }
                emit("recv", fields("body", body, "msg_id", view.getMessageId().toString(),
                    "attempt", view.getDeliveryAttempt(), "topic", view.getTopic(), "tag", view.getTag().orElse(null),
                    "keys", new TreeSet<>(view.getKeys())));
                boolean fail = failAlways.contains(body) || (failOnce.contains(body) && count == 1);
                synchronized (seen) {
                    if (!fail || (failAlways.contains(body) && count >= attempts)) {
                        consumed.add(body);
                        if (consumed.size() >= expect) {
                            done.countDown();
                        }
                    }
                }
                return fail ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
            }).build();
        emit("started", fields());
        int status = 0;
        if (!done.await((long) (num(params, "wait", 30) * 1000), TimeUnit.MILLISECONDS)) {
            synchronized (seen) {
                emit("error", fields("error", "consumed " + consumed + " of " + expect));
            }
            status = 1;
        }
        Thread.sleep((long) (num(params, "linger", 0.5) * 1000));
        consumer.close();
        return status;
    }

    /** The endpoint, TLS when "tls" is true (the SDK trusts any certificate), and "acl"'s keys when given. */
    static ClientConfiguration configuration(JsonObject params) {
        boolean tls = params.has("tls") && !params.get("tls").isJsonNull() && params.get("tls").getAsBoolean();
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder().setEndpoints(text(params, "endpoint"))
            .enableSsl(tls).setRequestTimeout(Duration.ofSeconds(5));
        if (params.has("acl") && params.get("acl").isJsonObject()) {
            JsonObject acl = params.getAsJsonObject("acl");
            builder.setCredentialProvider(new StaticSessionCredentialsProvider(text(acl, "access_key"), text(acl, "secret_key")));
        }
        return builder.build();
    }

    /**
     * One send per spec; each answered by a "sent" or a "refused" event (a producer that cannot start refuses all).
     * The producer names no topics up front: with them its start-up waits for the settings the endpoint sends back
     * on Telemetry, and an account without PUB on the topic never gets them (refused, as Apache's proxy refuses
     * it) and fails with "Task was cancelled"; without them each send shows the endpoint's own refusal.
     */
    static int refusedSend(JsonObject params, ClientServiceProvider provider, ClientConfiguration config, String topic) {
        JsonArray messages = params.getAsJsonArray("messages");
        Producer producer;
        try {
            producer = provider.newProducerBuilder().setClientConfiguration(config).build();
        } catch (Exception e) {
            for (JsonElement m : messages) {
                emit("refused", fields("body", text(m.getAsJsonObject(), "body"), "error", describe(e)));
            }
            return 0;
        }
        try {
            for (JsonElement m : messages) {
                JsonObject spec = m.getAsJsonObject();
                String body = text(spec, "body");
                try {
                    SendReceipt receipt = producer.send(build(provider, spec, topic));
                    emit("sent", fields("body", body, "msg_id", receipt.getMessageId().toString(), "offset", null));
                } catch (Exception e) {
                    emit("refused", fields("body", body, "error", describe(e)));
                }
            }
            producer.close();
        } catch (Exception e) {
            emit("error", fields("error", describe(e)));
            return 1;
        }
        return 0;
    }

    /** The exception and its causes' messages (the SDK wraps the endpoint's status in them). */
    static String describe(Throwable e) {
        StringBuilder out = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (out.length() > 0) {
                out.append(" <- ");
            }
            out.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        JsonObject params = GSON.fromJson(new InputStreamReader(System.in, StandardCharsets.UTF_8), JsonObject.class);
        String op = text(params, "op");
        String topic = text(params, "topic");
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = configuration(params);
        if ("consume".equals(op) || "crowd".equals(op) || "push".equals(op)) {
            int code;
            try {
                code = "push".equals(op) ? push(params, provider, config) : consume(params, provider, config);
            } catch (Exception e) {
                emit("error", fields("error", e.getClass().getSimpleName() + ": " + e.getMessage()));
                code = 1;
            }
            System.exit(code);
        }
        if ("refused_send".equals(op)) {
            System.exit(refusedSend(params, provider, config, topic));
        }
        JsonArray messages = params.getAsJsonArray("messages");
        Map<String, String> checkStates = new HashMap<>();
        Set<String> expected = new HashSet<>();
        for (JsonElement m : messages) {
            JsonObject spec = m.getAsJsonObject();
            checkStates.put(text(spec, "body"), text(spec, "check_state") == null ? "COMMIT" : text(spec, "check_state"));
            if ("check".equals(text(spec, "action"))) {
                expected.add(text(spec, "body"));
            }
        }
        CountDownLatch allChecked = new CountDownLatch(expected.size());
        Set<String> checked = new HashSet<>();
        ProducerBuilder builder = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic);
        if ("tx".equals(op)) {
            builder.setTransactionChecker(view -> {
                ByteBuffer body = view.getBody();
                byte[] bytes = new byte[body.remaining()];
                body.get(bytes);
                String label = new String(bytes, StandardCharsets.UTF_8).split("#", 2)[0];
                String state = checkStates.getOrDefault(label, "COMMIT");
                emit("checked", fields("body", label, "msg_id", view.getMessageId().toString(), "state", state));
                synchronized (checked) {
                    if (expected.contains(label) && checked.add(label)) {
                        allChecked.countDown();
                    }
                }
                return TransactionResolution.valueOf(state);
            });
        }
        int status = 0;
        try (Producer producer = builder.build()) {
            for (JsonElement m : messages) {
                JsonObject spec = m.getAsJsonObject();
                double at = System.currentTimeMillis() / 1000.0; // a delivery timestamp counts from here
                Message msg = build(provider, spec, topic);
                String body = text(spec, "body");
                if ("tx".equals(op)) {
                    Transaction tx = producer.beginTransaction();
                    SendReceipt receipt = producer.send(msg, tx);
                    emit("sent", fields("body", body, "at", at, "msg_id", receipt.getMessageId().toString(), "offset", null));
                    String action = text(spec, "action");
                    if ("commit".equals(action) || "rollback".equals(action)) {
                        emit("ended", fields("body", body, "action", action));
                        if ("commit".equals(action)) {
                            tx.commit();
                        } else {
                            tx.rollback();
                        }
                    }
                } else {
                    boolean async = params.has("async") && params.get("async").getAsBoolean();
                    SendReceipt receipt = async ? producer.sendAsync(msg).get(15, TimeUnit.SECONDS) : producer.send(msg);
                    emit("sent", fields("body", body, "at", at, "msg_id", receipt.getMessageId().toString(), "offset", null));
                }
            }
            double wait = params.has("wait") ? params.get("wait").getAsDouble() : 30;
            if (!expected.isEmpty() && !allChecked.await((long) (wait * 1000), TimeUnit.MILLISECONDS)) {
                emit("error", fields("error", "not every open transaction was checked"));
            }
        } catch (Exception e) {
            emit("error", fields("error", e.getClass().getSimpleName() + ": " + e.getMessage()));
            status = 1;
        }
        System.exit(status);
    }
}
