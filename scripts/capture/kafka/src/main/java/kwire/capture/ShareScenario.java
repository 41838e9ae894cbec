package kwire.capture;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share-group scenarios against a real Kafka 4.4 broker (scripts/capture/kafka_captures.py runs
 * one inside a network namespace while tcpdump records the loopback). The ground truth comes
 * from the clients' own APIs only: records received with their delivery counts, the
 * acknowledgements made, the acknowledgement commit callback's results, the admin client's
 * answers; it goes to TRUTH_FILE as {"groups", "topics", "clients", "events", "notes"} (events in
 * time order, those of member processes merged in).
 *
 * <p>java kwire.capture.ShareScenario SCENARIO BOOTSTRAP TRUTH_FILE WORK_DIR
 *
 * <p>Scenarios: implicit, explicit, stall-kill, mixed.
 */
public final class ShareScenario {
    private static final String DRIVER = "driver";
    /** The broker default (group.share.delivery.count.limit) when a group does not set its own. */
    private static final int BROKER_DELIVERY_LIMIT = 5;

    private final String bootstrap;
    private final Path workDir;
    private final Truth truth;
    private final Admin admin;
    private final String adminId;
    private final Map<String, Object> groups = new TreeMap<>();
    private final Map<String, Object> topics = new TreeMap<>();
    private final Map<String, Map<String, Object>> clients = new TreeMap<>();
    private final List<String> notes = new ArrayList<>();
    private final List<Path> childEvents = new ArrayList<>();
    private final Map<String, String> topicIds = new ConcurrentHashMap<>();
    private KafkaProducer<String, String> producer;
    private String producerId;

    private ShareScenario(String scenario, String bootstrap, Path workDir) throws Exception {
        this.bootstrap = bootstrap;
        this.workDir = workDir;
        this.truth = new Truth(workDir.resolve("events-driver.jsonl"), DRIVER);
        this.adminId = "admin-" + scenario;
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", adminId);
        this.admin = Admin.create(p);
        client(adminId, null, "admin", DRIVER);
    }

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        Path truthFile = Path.of(args[2]);
        Path workDir = Path.of(args[3]);
        Files.createDirectories(workDir);
        ShareScenario s = new ShareScenario(scenario, args[1], workDir);
        int code = 0;
        try {
            s.features();
            switch (scenario) {
                case "implicit" -> s.implicit();
                case "explicit" -> s.explicit();
                case "stall-kill" -> s.stallKill();
                case "mixed" -> s.mixed();
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            code = 1;
        } finally {
            s.finish(truthFile);
        }
        // Member threads of a failed scenario must not keep the JVM alive.
        System.exit(code);
    }

    // -- bookkeeping ------------------------------------------------------------------------

    private void client(String clientId, String group, String kind, String process) {
        Map<String, Object> c = new LinkedHashMap<>();
        c.put("group", group);
        c.put("kind", kind);
        c.put("process", process);
        clients.put(clientId, c);
    }

    private void group(String group, String mode, Map<String, String> configs) {
        Map<String, Object> g = new LinkedHashMap<>();
        g.put("mode", mode);
        g.put(
                "lock_ms",
                Integer.parseInt(configs.getOrDefault("share.record.lock.duration.ms", "15000")));
        g.put(
                "delivery_limit",
                Integer.parseInt(
                        configs.getOrDefault(
                                "share.delivery.count.limit", "" + BROKER_DELIVERY_LIMIT)));
        g.put("configs", new TreeMap<>(configs));
        groups.put(group, g);
    }

    private void finish(Path truthFile) throws Exception {
        try {
            if (producer != null) {
                truth.event(producerId, "closing");
                producer.close();
                truth.event(producerId, "closed");
            }
            truth.event(adminId, "closing");
            admin.close();
            truth.event(adminId, "closed");
        } finally {
            truth.close();
        }
        List<Map<String, Object>> events = new ArrayList<>();
        List<Path> files = new ArrayList<>(childEvents);
        files.add(0, workDir.resolve("events-driver.jsonl"));
        for (Path f : files) {
            for (String line : Files.readAllLines(f, StandardCharsets.UTF_8)) {
                if (!line.isBlank()) {
                    events.add(Map.of("line", line, "t", tOf(line)));
                }
            }
        }
        events.sort(Comparator.comparingDouble(e -> (Double) e.get("t")));
        StringBuilder sb = new StringBuilder();
        sb.append("{\"groups\": ").append(Truth.json(groups));
        sb.append(",\n \"topics\": ").append(Truth.json(topics));
        sb.append(",\n \"clients\": ").append(Truth.json(clients));
        sb.append(",\n \"notes\": ").append(Truth.json(notes));
        sb.append(",\n \"events\": [\n");
        for (int i = 0; i < events.size(); i++) {
            sb.append("  ").append(events.get(i).get("line"));
            sb.append(i + 1 < events.size() ? ",\n" : "\n");
        }
        sb.append(" ]}\n");
        Files.writeString(truthFile, sb.toString());
    }

    private static double tOf(String line) {
        int i = line.indexOf("\"t\": ") + 5;
        int j = line.indexOf(',', i);
        return Double.parseDouble(line.substring(i, j));
    }

    // -- admin ------------------------------------------------------------------------------

    private void admin(String call, Object request, Object answer, Throwable error) {
        truth.event(
                adminId, "admin", "call", call, "request", request, "answer", answer, "error",
                Truth.error(error));
    }

    private void features() throws Exception {
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
        Map<String, Object> finalized = new TreeMap<>();
        f.finalizedFeatures().forEach((k, v) -> finalized.put(k, v.maxVersionLevel()));
        admin("describeFeatures", null, Truth.map("finalized", finalized), null);
    }

    private void createTopic(String name, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get();
        admin("createTopics", Truth.map("topic", name, "partitions", partitions), null, null);
        String id = null;
        for (int i = 0; i < 50 && id == null; i++) {
            try {
                id =
                        admin.describeTopics(List.of(name))
                                .allTopicNames()
                                .get()
                                .get(name)
                                .topicId()
                                .toString();
            } catch (Exception e) {
                Thread.sleep(100);
            }
        }
        admin("describeTopics", Truth.map("topic", name), Truth.map("topic_id", id), null);
        topicIds.put(name, id);
        topics.put(name, Truth.map("partitions", partitions, "topic_id", id));
    }

    private void setGroupConfigs(String group, Map<String, String> configs) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        configs.forEach(
                (k, v) ->
                        ops.add(
                                new AlterConfigOp(
                                        new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        Throwable err = null;
        try {
            admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
        } catch (Exception e) {
            err = e;
        }
        admin(
                "incrementalAlterConfigs",
                Truth.map("resource", "GROUP", "name", group, "set", new TreeMap<>(configs)),
                null,
                err);
        if (err != null) {
            throw new RuntimeException(err);
        }
    }

    private Map<String, Object> describeGroupConfigs(String group) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
        Map<String, Object> answer = new TreeMap<>();
        for (ConfigEntry e : c.entries()) {
            if (e.name().startsWith("share.")) {
                answer.put(e.name(), Truth.map("value", e.value(), "source", e.source().name()));
            }
        }
        admin("describeConfigs", Truth.map("resource", "GROUP", "name", group), answer, null);
        return answer;
    }

    private Map<String, Object> describeShare(String group) throws Exception {
        ShareGroupDescription d =
                admin.describeShareGroups(List.of(group)).all().get().get(group);
        List<Object> members = new ArrayList<>();
        for (ShareMemberDescription m : d.members()) {
            List<Object> assigned = new ArrayList<>();
            m.assignment().topicPartitions().stream()
                    .sorted(Comparator.comparing(TopicPartition::toString))
                    .forEach(tp -> assigned.add(List.of(tp.topic(), tp.partition())));
            members.add(
                    Truth.map(
                            "member_id", m.consumerId(),
                            "client_id", m.clientId(),
                            "host", m.host(),
                            "member_epoch", m.memberEpoch(),
                            "assignment", assigned));
        }
        Map<String, Object> answer =
                Truth.map(
                        "group_id", d.groupId(),
                        "state", d.groupState().toString(),
                        "group_epoch", d.groupEpoch(),
                        "target_assignment_epoch", d.targetAssignmentEpoch(),
                        "coordinator", d.coordinator() == null ? null : d.coordinator().id(),
                        "members", members);
        admin("describeShareGroups", Truth.map("group", group), answer, null);
        return answer;
    }

    /** Each member's id as the group coordinator reports it (the Java client hides it). */
    private void memberIds(Map<String, Object> description) {
        for (Object o : (List<?>) description.get("members")) {
            Map<?, ?> mm = (Map<?, ?>) o;
            Map<String, Object> c = clients.get((String) mm.get("client_id"));
            if (c != null) {
                c.put("member_id", mm.get("member_id"));
            }
        }
    }

    /** describeShareGroups until `count` members each hold every partition in `needs`. */
    @SuppressWarnings("unchecked")
    private Map<String, Object> awaitShareMembers(
            String group, int count, Collection<List<Object>> needs) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            Map<String, Object> d;
            try {
                d = describeShare(group);
            } catch (java.util.concurrent.ExecutionException e) {
                // GroupIdNotFoundException until the first member has joined.
                admin("describeShareGroups", Truth.map("group", group), null, e);
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(500);
                continue;
            }
            List<Map<String, Object>> members = (List<Map<String, Object>>) d.get("members");
            boolean ok = members.size() == count;
            for (Map<String, Object> m : members) {
                ok &= ((List<Object>) m.get("assignment")).containsAll(needs);
            }
            if (ok) {
                for (Map<String, Object> m : members) {
                    Map<String, Object> c = clients.get((String) m.get("client_id"));
                    if (c != null) {
                        c.put("member_id", m.get("member_id"));
                    }
                }
                return d;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("group " + group + " never settled: " + d);
            }
            Thread.sleep(500);
        }
    }

    private Map<String, Object> listShareOffsets(String group) throws Exception {
        Map<TopicPartition, SharePartitionOffsetInfo> got =
                admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                        .partitionsToOffsetInfo(group)
                        .get();
        Map<String, Object> answer = new TreeMap<>();
        got.entrySet().stream()
                .sorted(Comparator.comparing(e -> e.getKey().toString()))
                .forEach(
                        e -> {
                            Map<String, Object> info =
                                    e.getValue() == null
                                            ? null
                                            : Truth.map(
                                                    "start_offset", e.getValue().startOffset(),
                                                    "leader_epoch", e.getValue().leaderEpoch(),
                                                    "lag", e.getValue().lag());
                            ((Map<String, Object>)
                                            answer.computeIfAbsent(
                                                    e.getKey().topic(), k -> new TreeMap<>()))
                                    .put("" + e.getKey().partition(), info);
                        });
        admin("listShareGroupOffsets", Truth.map("group", group), answer, null);
        return answer;
    }

    // -- producing --------------------------------------------------------------------------

    private void producer(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("acks", "all");
        p.put("linger.ms", "0");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        producer = new KafkaProducer<>(p);
        producerId = clientId;
        client(clientId, null, "producer", DRIVER);
    }

    /** One record, sent and awaited (so one record per batch), written down with its offset. */
    private long produce(String topic, Integer partition, String key, String value)
            throws Exception {
        RecordMetadata md =
                producer.send(new ProducerRecord<>(topic, partition, key, value)).get();
        truth.event(
                producerId,
                "produced",
                "topic",
                md.topic(),
                "partition",
                md.partition(),
                "offset",
                md.offset(),
                "key",
                key,
                "value",
                value,
                "timestamp",
                md.timestamp());
        return md.offset();
    }

    private ShareMemberClient member(
            String clientId, String group, boolean explicit, Map<String, Object> extra) {
        client(clientId, group, "share", DRIVER);
        return new ShareMemberClient(truth, bootstrap, clientId, group, explicit, extra);
    }

    private void note(String text) {
        notes.add(text);
        truth.event(DRIVER, "note", "text", text);
    }

    // -- scenarios --------------------------------------------------------------------------

    /**
     * Implicit acknowledgement: three members on a one-partition topic, all assigned partition 0
     * by the broker's simple assignor; a producer writes 30 records while they poll.
     */
    private void implicit() throws Exception {
        String topic = "share-implicit";
        String group = "share-implicit-g";
        createTopic(topic, 1);
        Map<String, String> cfg =
                Map.of(
                        "share.auto.offset.reset", "earliest",
                        "share.record.lock.duration.ms", "10000");
        setGroupConfigs(group, cfg);
        group(group, "implicit", cfg);
        producer("producer-implicit");
        Set<Long> received = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean(false);
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (String id : List.of("implicit-c1", "implicit-c2", "implicit-c3")) {
            ShareMemberClient m = member(id, group, false, Map.of("max.poll.records", "3"));
            Thread th =
                    new Thread(
                            () -> {
                                try {
                                    m.subscribe(topic);
                                    while (!stop.get()) {
                                        for (ConsumerRecord<String, String> r : m.poll(300)) {
                                            received.add(r.offset());
                                        }
                                    }
                                } catch (Throwable e) {
                                    synchronized (failures) {
                                        failures.add(e);
                                    }
                                } finally {
                                    m.close();
                                }
                            },
                            id);
            th.setDaemon(true);
            th.start();
            threads.add(th);
        }
        awaitShareMembers(group, 3, List.of(List.of(topic, 0)));
        note("all three members hold partition 0 (describeShareGroups), then 30 records follow");
        int n = 30;
        for (int i = 0; i < n; i++) {
            produce(topic, 0, null, String.format("i-%02d", i));
            Thread.sleep(100);
        }
        long deadline = System.currentTimeMillis() + 30_000;
        while (received.size() < n && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        describeShare(group);
        stop.set(true);
        for (Thread th : threads) {
            th.join();
        }
        if (!failures.isEmpty()) {
            throw new RuntimeException(failures.get(0));
        }
        listShareOffsets(group);
    }

    private static final long POISON = 2;
    private static final long REJECTED = 5;
    private static final long RENEWED = 8;
    private static final long RELEASED_ONCE = 10;

    /**
     * Explicit acknowledgement with a 2 s lock and a delivery limit of 3 set on the group: offset 2
     * is released on every delivery until the broker archives it, 5 is rejected, 8 is renewed
     * (RENEW) once past most of its lock and accepted after the original lock would have expired,
     * 10 is released once and accepted on its second delivery, the rest accepted. Commits
     * alternate: commitSync, commitAsync, none (the acknowledgements ride on the next poll).
     */
    private void explicit() throws Exception {
        String topic = "share-explicit";
        String group = "share-explicit-g";
        createTopic(topic, 1);
        Map<String, String> cfg = new TreeMap<>();
        cfg.put("share.auto.offset.reset", "earliest");
        cfg.put("share.record.lock.duration.ms", "2000");
        cfg.put("share.delivery.count.limit", "3");
        cfg.put("share.renew.acknowledge.enable", "true");
        setGroupConfigs(group, cfg);
        group(group, "explicit", cfg);
        describeGroupConfigs(group);
        producer("producer-explicit");
        int n = 12;
        for (int i = 0; i < n; i++) {
            produce(topic, 0, "k" + (i % 3), String.format("e-%02d", i));
        }
        int limit = 3;
        ShareMemberClient m = member("explicit-c1", group, true, Map.of("max.poll.records", "4"));
        m.subscribe(topic);
        boolean described = false;
        Set<Long> done = new HashSet<>();
        boolean poisonArchived = false;
        boolean renewed = false;
        int batch = 0;
        int quietPolls = 0;
        long deadline = System.currentTimeMillis() + 90_000;
        while (System.currentTimeMillis() < deadline) {
            boolean finished = poisonArchived && done.size() == n - 1;
            if (finished && quietPolls >= 4) {
                break;
            }
            List<ConsumerRecord<String, String>> recs = m.poll(500);
            if (recs.isEmpty()) {
                if (finished) {
                    quietPolls++;
                }
                continue;
            }
            if (!described) {
                memberIds(describeShare(group)); // the member id and its assignment
                described = true;
            }
            boolean renewNow = !renewed && recs.stream().anyMatch(r -> r.offset() == RENEWED);
            if (renewNow) {
                note("slow processing: 1500 ms before acknowledging the batch holding offset 8");
                Thread.sleep(1500);
            }
            for (ConsumerRecord<String, String> r : recs) {
                long off = r.offset();
                int count = r.deliveryCount().map(Short::intValue).orElse(0);
                if (off == POISON) {
                    m.ack(r, AcknowledgeType.RELEASE);
                    if (count >= limit) {
                        poisonArchived = true;
                    }
                } else if (off == REJECTED) {
                    m.ack(r, AcknowledgeType.REJECT);
                    done.add(off);
                } else if (off == RENEWED && !renewed) {
                    m.ack(r, AcknowledgeType.RENEW);
                    renewed = true;
                } else if (off == RELEASED_ONCE && count == 1) {
                    m.ack(r, AcknowledgeType.RELEASE);
                } else {
                    m.ack(r, AcknowledgeType.ACCEPT);
                    done.add(off);
                }
            }
            if (renewNow) {
                m.commitSync();
                note("offset 8 renewed; 1500 ms more before it is acknowledged");
                Thread.sleep(1500);
            } else if (batch % 3 == 0) {
                m.commitSync();
            } else if (batch % 3 == 1) {
                m.commitAsync();
            }
            batch++;
        }
        m.close();
        listShareOffsets(group);
    }

    /**
     * A member stalls past the 3 s lock holding three records; another member gets them again
     * (delivery count 2) and holds them while the staller acknowledges late (refused). Then a
     * member in its own JVM polls three records and is killed with SIGKILL; they come back to the
     * remaining member.
     */
    private void stallKill() throws Exception {
        String topic = "share-stall";
        String group = "share-stall-g";
        createTopic(topic, 1);
        Map<String, String> cfg = new TreeMap<>();
        cfg.put("share.auto.offset.reset", "earliest");
        cfg.put("share.record.lock.duration.ms", "3000");
        cfg.put("share.delivery.count.limit", "5");
        setGroupConfigs(group, cfg);
        group(group, "explicit", cfg);
        producer("producer-stall");
        for (int i = 0; i < 6; i++) {
            produce(topic, 0, null, String.format("s-%02d", i));
        }
        Map<String, Object> conf =
                Map.of("max.poll.records", "3", "share.acquire.mode", "record_limit");
        ShareMemberClient s1 = member("stall-c1", group, true, conf);
        s1.subscribe(topic);
        List<ConsumerRecord<String, String>> held1 = List.of();
        long deadline = System.currentTimeMillis() + 60_000;
        while (held1.isEmpty() && System.currentTimeMillis() < deadline) {
            held1 = s1.poll(500);
        }
        List<Long> stalled = held1.stream().map(ConsumerRecord::offset).toList();
        truth.event(s1.clientId, "stall_begin", "topic", topic, "offsets", stalled);

        ShareMemberClient s2 = member("stall-c2", group, true, conf);
        s2.subscribe(topic);
        List<ConsumerRecord<String, String>> again = new ArrayList<>();
        boolean described = false;
        deadline = System.currentTimeMillis() + 60_000;
        while (again.isEmpty() && System.currentTimeMillis() < deadline) {
            List<ConsumerRecord<String, String>> recs = s2.poll(500);
            for (ConsumerRecord<String, String> r : recs) {
                if (stalled.contains(r.offset())) {
                    again.add(r); // held: not acknowledged until the staller has tried
                } else {
                    s2.ack(r, AcknowledgeType.ACCEPT);
                }
            }
            if (!recs.isEmpty() && again.isEmpty()) {
                s2.commitSync();
                if (!described) {
                    // Both members, each with partition 0 (stall-c1 still holds its records).
                    memberIds(describeShare(group));
                    described = true;
                }
            }
        }
        note("stall-c2 holds the stalled records again (delivery count 2); stall-c1 acks late");
        truth.event(s1.clientId, "stall_end", "topic", topic, "offsets", stalled);
        for (ConsumerRecord<String, String> r : held1) {
            s1.ack(r, AcknowledgeType.ACCEPT);
        }
        s1.commitSync();
        for (ConsumerRecord<String, String> r : again) {
            s2.ack(r, AcknowledgeType.ACCEPT);
        }
        s2.commitSync();
        s1.close();

        // The kill: a member in its own process holds records and is killed with SIGKILL.
        for (int i = 6; i < 9; i++) {
            produce(topic, 0, null, String.format("s-%02d", i));
        }
        String killedId = "stall-c3";
        client(killedId, group, "share", "member-" + killedId);
        Path events = workDir.resolve("events-" + killedId + ".jsonl");
        childEvents.add(events);
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(
                List.of(
                        "-Xmx256m",
                        "-XX:+UseSerialGC",
                        "-XX:TieredStopAtLevel=1",
                        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                        "-cp",
                        System.getProperty("java.class.path"),
                        ShareMember.class.getName(),
                        bootstrap,
                        killedId,
                        group,
                        topic,
                        events.toString(),
                        "3"));
        truth.event(DRIVER, "start_process", "client_id", killedId);
        Process child =
                new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out =
                new BufferedReader(
                        new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        String line;
        String heldLine = null;
        while ((line = out.readLine()) != null) {
            if (line.startsWith("HELD ")) {
                heldLine = line.substring(5);
                break;
            }
        }
        if (heldLine == null) {
            throw new IllegalStateException(killedId + " ended without holding records");
        }
        List<Long> held3 = new ArrayList<>();
        for (String part : heldLine.replaceAll("[\\[\\] ]", "").split(",")) {
            if (!part.isEmpty()) {
                held3.add(Long.parseLong(part));
            }
        }
        memberIds(describeShare(group));
        Thread.sleep(300);
        truth.event(
                killedId,
                "killed",
                "signal",
                "SIGKILL",
                "pid",
                child.pid(),
                "topic",
                topic,
                "offsets",
                held3);
        child.destroyForcibly(); // SIGKILL on Linux
        child.waitFor();
        truth.event(DRIVER, "process_exit", "client_id", killedId, "code", child.exitValue());

        Set<Long> back = new HashSet<>();
        deadline = System.currentTimeMillis() + 60_000;
        while (!back.containsAll(held3) && System.currentTimeMillis() < deadline) {
            List<ConsumerRecord<String, String>> recs = s2.poll(500);
            for (ConsumerRecord<String, String> r : recs) {
                back.add(r.offset());
                s2.ack(r, AcknowledgeType.ACCEPT);
            }
            if (!recs.isEmpty()) {
                s2.commitSync();
            }
        }
        s2.close();
        listShareOffsets(group);
    }

    /**
     * A share group (two members, implicit) and a classic consumer group read one two-partition
     * topic; then the admin describes the share group, lists its offsets and, once the members
     * have closed, alters and deletes them.
     */
    private void mixed() throws Exception {
        String topic = "share-mixed";
        String group = "share-mixed-g";
        String classic = "classic-mixed-g";
        createTopic(topic, 2);
        Map<String, String> cfg = Map.of("share.auto.offset.reset", "earliest");
        setGroupConfigs(group, cfg);
        group(group, "implicit", cfg);
        producer("producer-mixed");
        int n = 20;
        for (int i = 0; i < n; i++) {
            produce(topic, i % 2, "k" + i, String.format("m-%02d", i));
        }
        Set<String> received = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean(false);
        List<ShareMemberClient> members = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (String id : List.of("mixed-c1", "mixed-c2")) {
            ShareMemberClient m = member(id, group, false, Map.of("max.poll.records", "5"));
            members.add(m);
            Thread th =
                    new Thread(
                            () -> {
                                m.subscribe(topic);
                                while (!stop.get()) {
                                    for (ConsumerRecord<String, String> r : m.poll(300)) {
                                        received.add(r.partition() + "/" + r.offset());
                                    }
                                }
                            },
                            id);
            th.setDaemon(true);
            th.start();
            threads.add(th);
        }
        // The classic group, in this thread.
        String classicId = "classic-k1";
        client(classicId, classic, "classic", DRIVER);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", classicId);
        p.put("group.id", classic);
        p.put("group.protocol", "classic");
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> k = new KafkaConsumer<>(p)) {
            k.subscribe(List.of(topic));
            truth.event(classicId, "subscribed", "group", classic, "topics", List.of(topic));
            int got = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = k.poll(java.time.Duration.ofMillis(300));
                for (ConsumerRecord<String, String> r : recs) {
                    got++;
                    truth.event(
                            classicId, "received", "topic", r.topic(), "partition",
                            r.partition(), "offset", r.offset(), "delivery_count", null,
                            "key", r.key(), "value", r.value());
                }
                if (!recs.isEmpty()) {
                    Map<TopicPartition, OffsetAndMetadata> offs = new TreeMap<>(
                            Comparator.comparing(TopicPartition::toString));
                    for (TopicPartition tp : recs.partitions()) {
                        List<ConsumerRecord<String, String>> l = recs.records(tp);
                        offs.put(tp, new OffsetAndMetadata(l.get(l.size() - 1).offset() + 1));
                    }
                    k.commitSync(offs);
                    List<Object> c = new ArrayList<>();
                    offs.forEach(
                            (tp, om) -> c.add(List.of(tp.topic(), tp.partition(), om.offset())));
                    truth.event(classicId, "commit", "offsets", c, "error", null);
                }
            }
            long deadline2 = System.currentTimeMillis() + 30_000;
            while (received.size() < n && System.currentTimeMillis() < deadline2) {
                Thread.sleep(100);
            }
            memberIds(describeShare(group));
            ConsumerGroupDescription cg =
                    admin.describeConsumerGroups(List.of(classic)).all().get().get(classic);
            List<Object> cms = new ArrayList<>();
            for (MemberDescription md : cg.members()) {
                List<Object> a = new ArrayList<>();
                md.assignment()
                        .topicPartitions()
                        .forEach(tp -> a.add(List.of(tp.topic(), tp.partition())));
                cms.add(Truth.map("member_id", md.consumerId(), "client_id", md.clientId(),
                        "assignment", a));
                clients.get(classicId).put("member_id", md.consumerId());
            }
            admin("describeConsumerGroups", Truth.map("group", classic),
                    Truth.map("state", cg.groupState().toString(), "type", cg.type().toString(),
                            "protocol", cg.partitionAssignor(), "members", cms), null);
            truth.event(classicId, "closing");
        }
        truth.event(classicId, "closed");
        listShareOffsets(group);
        stop.set(true);
        for (Thread th : threads) {
            th.join();
        }
        for (ShareMemberClient m : members) {
            m.close();
        }
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(classic).partitionsToOffsetAndMetadata().get();
        Map<String, Object> ca = new TreeMap<>();
        committed.forEach((tp, om) -> ca.put(tp.toString(), om == null ? null : om.offset()));
        admin("listConsumerGroupOffsets", Truth.map("group", classic), ca, null);
        List<Object> listed = new ArrayList<>();
        for (GroupListing g : admin.listGroups(new ListGroupsOptions()).all().get()) {
            listed.add(Truth.map("group_id", g.groupId(), "type",
                    g.type().map(Object::toString).orElse(null), "protocol", g.protocol(),
                    "state", g.groupState().map(Object::toString).orElse(null)));
        }
        listed.sort(Comparator.comparing(o -> (String) ((Map<?, ?>) o).get("group_id")));
        admin("listGroups", null, listed, null);
        describeShare(group);
        Map<TopicPartition, Long> to =
                new TreeMap<>(Comparator.comparing(TopicPartition::toString));
        to.put(new TopicPartition(topic, 0), 4L);
        to.put(new TopicPartition(topic, 1), 0L);
        Throwable err = null;
        try {
            admin.alterShareGroupOffsets(group, to).all().get();
        } catch (Exception e) {
            err = e;
        }
        Map<String, Object> req = new TreeMap<>();
        to.forEach((tp, o) -> req.put(tp.toString(), o));
        admin("alterShareGroupOffsets", Truth.map("group", group, "offsets", req), null, err);
        listShareOffsets(group);
        err = null;
        try {
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get();
        } catch (Exception e) {
            err = e;
        }
        admin("deleteShareGroupOffsets", Truth.map("group", group, "topics", List.of(topic)),
                null, err);
        listShareOffsets(group);
    }
}
