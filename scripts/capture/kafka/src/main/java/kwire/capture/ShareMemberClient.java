package kwire.capture;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One share-group member (KafkaShareConsumer) that writes down what its client reports: each
 * record received with its delivery count, each acknowledgement it makes (in implicit mode the
 * ACCEPTs the client sends for the previous batch at the next poll, commit or close), the
 * acknowledgement commit callback's results, commits and the lock timeout the broker announced.
 */
final class ShareMemberClient implements AutoCloseable {
    final String clientId;
    final String group;
    final boolean explicit;
    final KafkaShareConsumer<String, String> consumer;
    private final Truth truth;
    private List<ConsumerRecord<String, String>> lastBatch = List.of();
    // Offsets this member renewed (RENEW) and has not yet acknowledged for good.
    private final java.util.Set<String> renewing = new java.util.HashSet<>();

    ShareMemberClient(
            Truth truth,
            String bootstrap,
            String clientId,
            String group,
            boolean explicit,
            Map<String, Object> extra) {
        this.truth = truth;
        this.clientId = clientId;
        this.group = group;
        this.explicit = explicit;
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", clientId);
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.putAll(extra);
        Map<String, Object> conf = new java.util.TreeMap<>();
        p.forEach((k, v) -> conf.put(k.toString(), v.toString()));
        truth.event(clientId, "created", "group", group, "kind", "share", "config", conf);
        consumer = new KafkaShareConsumer<>(p);
        consumer.setAcknowledgementCommitCallback(
                (offsets, exception) -> {
                    for (Map.Entry<TopicIdPartition, java.util.Set<Long>> e : offsets.entrySet()) {
                        truth.event(
                                clientId,
                                "ack_result",
                                "topic",
                                e.getKey().topic(),
                                "partition",
                                e.getKey().partition(),
                                "offsets",
                                new ArrayList<>(new TreeSet<>(e.getValue())),
                                "error",
                                Truth.error(exception));
                    }
                });
    }

    void subscribe(String... topics) {
        consumer.subscribe(List.of(topics));
        truth.event(clientId, "subscribed", "group", group, "topics", List.of(topics));
    }

    /** In implicit mode the client ACCEPTs the previous batch when it polls, commits or closes. */
    private void implicitAcks(String via) {
        if (explicit) {
            return;
        }
        for (ConsumerRecord<String, String> r : lastBatch) {
            truth.event(
                    clientId,
                    "ack",
                    "type",
                    "ACCEPT",
                    "topic",
                    r.topic(),
                    "partition",
                    r.partition(),
                    "offset",
                    r.offset(),
                    "implicit",
                    true,
                    "via",
                    via);
        }
        lastBatch = List.of();
    }

    List<ConsumerRecord<String, String>> poll(long millis) {
        implicitAcks("poll");
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(millis));
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        for (ConsumerRecord<String, String> r : records) {
            got.add(r);
            truth.event(
                    clientId,
                    "received",
                    "topic",
                    r.topic(),
                    "partition",
                    r.partition(),
                    "offset",
                    r.offset(),
                    "delivery_count",
                    r.deliveryCount().map(Short::intValue).orElse(null),
                    "key",
                    r.key(),
                    "value",
                    r.value(),
                    "after_renew",
                    renewing.contains(key(r)));
        }
        if (!got.isEmpty()) {
            Optional<Integer> lock = consumer.acquisitionLockTimeoutMs();
            truth.event(
                    clientId, "polled", "records", got.size(), "acquisition_lock_timeout_ms", lock);
        }
        lastBatch = got;
        return got;
    }

    private static String key(ConsumerRecord<String, String> r) {
        return r.topic() + "/" + r.partition() + "/" + r.offset();
    }

    void ack(ConsumerRecord<String, String> r, AcknowledgeType type) {
        consumer.acknowledge(r, type);
        if (type == AcknowledgeType.RENEW) {
            renewing.add(key(r));
        } else {
            renewing.remove(key(r));
        }
        truth.event(
                clientId,
                "ack",
                "type",
                type.name(),
                "topic",
                r.topic(),
                "partition",
                r.partition(),
                "offset",
                r.offset(),
                "delivery_count",
                r.deliveryCount().map(Short::intValue).orElse(null));
    }

    Map<TopicIdPartition, Optional<KafkaException>> commitSync() {
        implicitAcks("commit_sync");
        truth.event(clientId, "commit_sync");
        Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
        List<Object> parts = new ArrayList<>();
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
            parts.add(
                    Truth.map(
                            "topic",
                            e.getKey().topic(),
                            "partition",
                            e.getKey().partition(),
                            "error",
                            e.getValue().map(Truth::error).orElse(null)));
        }
        truth.event(clientId, "commit_sync_result", "partitions", parts);
        return result;
    }

    void commitAsync() {
        implicitAcks("commit_async");
        truth.event(clientId, "commit_async");
        consumer.commitAsync();
    }

    @Override
    public void close() {
        implicitAcks("close");
        truth.event(clientId, "closing");
        consumer.close();
        truth.event(clientId, "closed");
    }
}
