package kwire.capture;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams side of the streams-group capture (scripts/capture/streams_capture.py).
 *
 * <pre>
 *   StreamsScenario instance NAME BOOTSTRAP APP_ID STATE_DIR INPUT OUTPUT
 *   StreamsScenario control BOOTSTRAP APP_ID
 * </pre>
 *
 * <p>An instance is one Kafka Streams client (one JVM, one stream thread) with
 * {@code group.protocol=streams}: input → groupBy(value) through a repartition topic → count in
 * an in-memory store with a changelog → output, so two subtopologies (0: source and repartition
 * sink; 1: repartition source, the stateful count). It writes what its own APIs say as JSON lines
 * on stdout: its identity (client ids from {@code metadataForLocalThreads()}, the process id),
 * every state transition from {@code setStateListener}, and its tasks ({@code ThreadMetadata}
 * active and standby tasks, and the warm-up tasks of the streams protocol's reconciled
 * assignment) whenever they change. Standing instructions on stdin: {@code close} (close and leave
 * the group), end of input does the same.
 *
 * <p>The control process is the scenario's admin client and producer: on stdin {@code setup
 * INPUT PARTS OUTPUT PARTS STANDBYS}, {@code produce N}, {@code describe} (the admin client's
 * describeStreamsGroups: StreamsGroupDescribe on the wire), {@code quit}; it answers each with
 * one JSON line.
 */
public final class StreamsScenario {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String[] COLOURS = {"red", "green", "blue", "amber", "violet"};

    private StreamsScenario() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 7 && args[0].equals("instance")) {
            instance(args[1], args[2], args[3], args[4], args[5], args[6]);
        } else if (args.length == 3 && args[0].equals("control")) {
            control(args[1], args[2]);
        } else {
            System.err.println("usage: instance NAME BOOTSTRAP APP_ID STATE_DIR INPUT OUTPUT"
                    + " | control BOOTSTRAP APP_ID");
            System.exit(2);
        }
    }

    static synchronized void emit(Map<String, Object> event) {
        try {
            System.out.println(JSON.writeValueAsString(event));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
        System.out.flush();
    }

    static Map<String, Object> event(String instance, String kind) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("t", System.currentTimeMillis());
        e.put("instance", instance);
        e.put("event", kind);
        return e;
    }

    // ---------------------------------------------------------------- a Kafka Streams instance

    static Topology topology(String appInput, String appOutput) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(appInput, Consumed.with(Serdes.String(), Serdes.String()).withName("input"))
                .groupBy((key, colour) -> colour,
                        Grouped.with("by-colour", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("colour-counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(appOutput, Produced.with(Serdes.String(), Serdes.Long()).withName("output"));
        return builder.build();
    }

    static List<Map<String, Object>> describeTopology(Topology topology) {
        List<Map<String, Object>> out = new ArrayList<>();
        TreeSet<Integer> ids = new TreeSet<>();
        Map<Integer, TopologyDescription.Subtopology> byId = new LinkedHashMap<>();
        for (TopologyDescription.Subtopology s : topology.describe().subtopologies()) {
            ids.add(s.id());
            byId.put(s.id(), s);
        }
        for (int id : ids) {
            TreeSet<String> sources = new TreeSet<>();
            TreeSet<String> sinks = new TreeSet<>();
            TreeSet<String> stores = new TreeSet<>();
            for (TopologyDescription.Node node : byId.get(id).nodes()) {
                if (node instanceof TopologyDescription.Source source && source.topicSet() != null) {
                    sources.addAll(source.topicSet());
                } else if (node instanceof TopologyDescription.Sink sink && sink.topic() != null) {
                    sinks.add(sink.topic());
                } else if (node instanceof TopologyDescription.Processor processor) {
                    stores.addAll(processor.stores());
                }
            }
            Map<String, Object> s = new LinkedHashMap<>();
            s.put("subtopology", id);
            s.put("source_topics", new ArrayList<>(sources));
            s.put("sink_topics", new ArrayList<>(sinks));
            s.put("stores", new ArrayList<>(stores));
            out.add(s);
        }
        return out;
    }

    static void instance(String name, String bootstrap, String appId, String stateDir,
            String input, String output) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, "kwire-streams-" + name);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 2000);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // Fewer empty fetches on the wire: the main and restore consumers wait up to 2 s.
        props.put(StreamsConfig.mainConsumerPrefix("fetch.max.wait.ms"), 2000);
        props.put(StreamsConfig.restoreConsumerPrefix("fetch.max.wait.ms"), 2000);
        // num.standby.replicas is a group config under the streams protocol (the control process
        // sets streams.num.standby.replicas); the client would only warn that it ignores its own.

        Topology topology = topology(input, output);
        KafkaStreams streams = new KafkaStreams(topology, props);
        Object lock = new Object();

        Map<String, Object> started = event(name, "started");
        started.put("pid", ProcessHandle.current().pid());
        started.put("client_id", props.get(StreamsConfig.CLIENT_ID_CONFIG));
        started.put("group_protocol", "streams");
        started.put("process_id", processId(streams));
        Map<String, Object> configs = new java.util.TreeMap<>();
        props.forEach((k, v) -> configs.put(String.valueOf(k), String.valueOf(v)));
        started.put("configs", configs);
        started.put("topology", describeTopology(topology));
        emit(started);

        streams.setStateListener((newState, oldState) -> {
            Map<String, Object> e = event(name, "state");
            e.put("from", oldState.name());
            e.put("to", newState.name());
            emit(e);
            synchronized (lock) {
                lock.notifyAll();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            Map<String, Object> e = event(name, "error");
            e.put("error", String.valueOf(exception));
            emit(e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();

        // Commands on stdin, read on their own thread.
        final String[] command = {null};
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    line = line.trim();
                    if (line.equals("close")) {
                        break;
                    }
                }
            } catch (Exception ignored) {
                // end of input closes as well
            }
            synchronized (lock) {
                command[0] = "close";
                lock.notifyAll();
            }
        }, "stdin");
        reader.setDaemon(true);
        reader.start();

        boolean identified = false;
        Map<String, Object> last = null;
        while (true) {
            synchronized (lock) {
                if (command[0] != null) {
                    break;
                }
                lock.wait(250);
                if (command[0] != null) {
                    break;
                }
            }
            KafkaStreams.State state = streams.state();
            if (state == KafkaStreams.State.ERROR || state == KafkaStreams.State.NOT_RUNNING
                    || state == KafkaStreams.State.PENDING_ERROR) {
                break;
            }
            Set<ThreadMetadata> threads;
            try {
                threads = streams.metadataForLocalThreads();
            } catch (Exception e) {
                continue;
            }
            if (!identified && !threads.isEmpty()) {
                identified = true;
                Map<String, Object> e = event(name, "identity");
                e.put("process_id", processId(streams));
                List<Map<String, Object>> ts = new ArrayList<>();
                for (ThreadMetadata t : threads) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("thread", t.threadName());
                    m.put("consumer_client_id", t.consumerClientId());
                    m.put("restore_consumer_client_id", t.restoreConsumerClientId());
                    m.put("producer_client_ids", new ArrayList<>(new TreeSet<>(t.producerClientIds())));
                    m.put("admin_client_id", t.adminClientId());
                    ts.add(m);
                }
                e.put("threads", ts);
                emit(e);
            }
            Map<String, Object> tasks = tasksOf(threads, streams);
            if (!tasks.equals(last)) {
                last = tasks;
                Map<String, Object> e = event(name, "tasks");
                e.put("kafka_streams_state", state.name());
                e.putAll(tasks);
                emit(e);
            }
        }

        if (command[0] != null) {
            emit(event(name, "closing"));
            boolean clean = streams.close(CloseOptions
                    .groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(30)));
            Map<String, Object> e = event(name, "closed");
            e.put("clean", clean);
            e.put("group_membership_operation", "LEAVE_GROUP");
            emit(e);
        } else {
            Map<String, Object> e = event(name, "stopped");
            e.put("kafka_streams_state", streams.state().name());
            emit(e);
            streams.close(Duration.ofSeconds(10));
        }
        System.exit(0);
    }

    static List<String> taskIds(Collection<TaskMetadata> tasks) {
        TreeSet<String> ids = new TreeSet<>();
        for (TaskMetadata t : tasks) {
            ids.add(t.taskId().subtopology() + "_" + t.taskId().partition());
        }
        return new ArrayList<>(ids);
    }

    static Map<String, Object> tasksOf(Set<ThreadMetadata> threads, KafkaStreams streams) {
        List<TaskMetadata> active = new ArrayList<>();
        List<TaskMetadata> standby = new ArrayList<>();
        for (ThreadMetadata t : threads) {
            active.addAll(t.activeTasks());
            standby.addAll(t.standbyTasks());
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("active", taskIds(active));
        m.put("standby", taskIds(standby));
        Map<String, Object> reconciled = reconciledAssignment(streams);
        if (reconciled != null) {
            m.put("protocol_assignment", reconciled);
        }
        return m;
    }

    /** KafkaStreams' own process id: a private field, read here by reflection. */
    static String processId(KafkaStreams streams) {
        try {
            Field f = KafkaStreams.class.getDeclaredField("processId");
            f.setAccessible(true);
            return String.valueOf(f.get(streams));
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /**
     * The assignment the streams protocol's membership manager last reconciled (active, standby
     * and warm-up tasks), from each StreamThread's StreamsRebalanceData: internal API, read by
     * reflection; null if it is not there.
     */
    static Map<String, Object> reconciledAssignment(KafkaStreams streams) {
        try {
            Field threadsField = KafkaStreams.class.getDeclaredField("threads");
            threadsField.setAccessible(true);
            TreeSet<String> active = new TreeSet<>();
            TreeSet<String> standby = new TreeSet<>();
            TreeSet<String> warmup = new TreeSet<>();
            boolean any = false;
            for (Object thread : new ArrayList<>((List<?>) threadsField.get(streams))) {
                Method m = thread.getClass().getDeclaredMethod("streamsRebalanceData");
                m.setAccessible(true);
                Optional<?> data = (Optional<?>) m.invoke(thread);
                if (data.isEmpty()) {
                    continue;
                }
                Object assignment = data.get().getClass().getMethod("reconciledAssignment")
                        .invoke(data.get());
                any = true;
                collect(assignment, "activeTasks", active);
                collect(assignment, "standbyTasks", standby);
                collect(assignment, "warmupTasks", warmup);
            }
            if (!any) {
                return null;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("active", new ArrayList<>(active));
            m.put("standby", new ArrayList<>(standby));
            m.put("warmup", new ArrayList<>(warmup));
            return m;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    private static void collect(Object assignment, String method, Set<String> into)
            throws ReflectiveOperationException {
        Method getter = assignment.getClass().getMethod(method);
        getter.setAccessible(true);
        for (Object task : (Set<?>) getter.invoke(assignment)) {
            Method subtopology = task.getClass().getMethod("subtopologyId");
            Method partition = task.getClass().getMethod("partitionId");
            subtopology.setAccessible(true);
            partition.setAccessible(true);
            into.add(subtopology.invoke(task) + "_" + partition.invoke(task));
        }
    }

    // ---------------------------------------------------------------- the control process

    static void control(String bootstrap, String appId) throws Exception {
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        adminProps.put(AdminClientConfig.CLIENT_ID_CONFIG, "kwire-streams-admin");
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.CLIENT_ID_CONFIG, "kwire-streams-producer");
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        int seq = 0;
        String input = null;
        try (Admin admin = Admin.create(adminProps);
             KafkaProducer<String, String> producer = new KafkaProducer<>(
                     producerProps, new StringSerializer(), new StringSerializer());
             BufferedReader in = new BufferedReader(
                     new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split("\\s+");
                Map<String, Object> e = event("control", words[0]);
                try {
                    switch (words[0]) {
                        case "setup" -> {
                            input = words[1];
                            List<NewTopic> topics = List.of(
                                    new NewTopic(words[1], Integer.parseInt(words[2]), (short) 1),
                                    new NewTopic(words[3], Integer.parseInt(words[4]), (short) 1));
                            admin.createTopics(topics).all().get(30, TimeUnit.SECONDS);
                            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, appId);
                            Collection<AlterConfigOp> ops = List.of(new AlterConfigOp(
                                    new ConfigEntry("streams.num.standby.replicas", words[5]),
                                    AlterConfigOp.OpType.SET));
                            admin.incrementalAlterConfigs(Map.of(group, ops)).all()
                                    .get(30, TimeUnit.SECONDS);
                            e.put("topics", Map.of(words[1], Integer.parseInt(words[2]),
                                    words[3], Integer.parseInt(words[4])));
                            e.put("group_configs", Map.of("streams.num.standby.replicas", words[5]));
                        }
                        case "produce" -> {
                            int n = Integer.parseInt(words[1]);
                            List<Map<String, Object>> records = new ArrayList<>();
                            for (int i = 0; i < n; i++, seq++) {
                                String key = "user-" + (seq % 7);
                                String value = COLOURS[(seq * 3 + seq / 5) % COLOURS.length];
                                RecordMetadata md = producer.send(
                                        new ProducerRecord<>(input, key, value)).get(30, TimeUnit.SECONDS);
                                Map<String, Object> r = new LinkedHashMap<>();
                                r.put("topic", md.topic());
                                r.put("partition", md.partition());
                                r.put("offset", md.offset());
                                r.put("key", key);
                                r.put("value", value);
                                records.add(r);
                            }
                            e.put("records", records);
                        }
                        case "describe" -> e.put("group", describe(admin, appId));
                        case "quit" -> {
                            emit(e);
                            return;
                        }
                        default -> e.put("error", "unknown command " + words[0]);
                    }
                } catch (ExecutionException ex) {
                    e.put("error", String.valueOf(ex.getCause()));
                } catch (Exception ex) {
                    e.put("error", String.valueOf(ex));
                }
                emit(e);
            }
        }
    }

    static List<String> tasks(List<StreamsGroupMemberAssignment.TaskIds> tasks) {
        TreeSet<String> ids = new TreeSet<>();
        for (StreamsGroupMemberAssignment.TaskIds t : tasks) {
            for (int p : t.partitions()) {
                ids.add(t.subtopologyId() + "_" + p);
            }
        }
        return new ArrayList<>(ids);
    }

    static Map<String, Object> assignment(StreamsGroupMemberAssignment a) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("active", tasks(a.activeTasks()));
        m.put("standby", tasks(a.standbyTasks()));
        m.put("warmup", tasks(a.warmupTasks()));
        return m;
    }

    static Map<String, Object> topicInfos(
            Map<String, StreamsGroupSubtopologyDescription.TopicInfo> topics) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : new TreeSet<>(topics.keySet())) {
            StreamsGroupSubtopologyDescription.TopicInfo info = topics.get(name);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("partitions", info.partitions());
            m.put("replication_factor", info.replicationFactor());
            m.put("configs", new java.util.TreeMap<>(info.topicConfigs()));
            out.put(name, m);
        }
        return out;
    }

    static Map<String, Object> describe(Admin admin, String appId) throws Exception {
        StreamsGroupDescription d = admin.describeStreamsGroups(List.of(appId))
                .describedGroups().get(appId).get(30, TimeUnit.SECONDS);
        Map<String, Object> g = new LinkedHashMap<>();
        g.put("group_id", d.groupId());
        g.put("state", String.valueOf(d.groupState()));
        g.put("group_epoch", d.groupEpoch());
        g.put("target_assignment_epoch", d.targetAssignmentEpoch());
        g.put("topology_epoch", d.topologyEpoch());
        g.put("assignor", d.assignorName().orElse(null));
        List<Map<String, Object>> subs = new ArrayList<>();
        for (StreamsGroupSubtopologyDescription s : d.subtopologies()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("subtopology_id", s.subtopologyId());
            m.put("source_topics", s.sourceTopics());
            m.put("repartition_sink_topics", s.repartitionSinkTopics());
            m.put("state_changelog_topics", topicInfos(s.stateChangelogTopics()));
            m.put("repartition_source_topics", topicInfos(s.repartitionSourceTopics()));
            subs.add(m);
        }
        g.put("subtopologies", subs);
        List<Map<String, Object>> members = new ArrayList<>();
        for (StreamsGroupMemberDescription m : d.members()) {
            Map<String, Object> x = new LinkedHashMap<>();
            x.put("member_id", m.memberId());
            x.put("member_epoch", m.memberEpoch());
            x.put("client_id", m.clientId());
            x.put("client_host", m.clientHost());
            x.put("process_id", m.processId());
            x.put("instance_id", m.instanceId().orElse(null));
            x.put("topology_epoch", m.topologyEpoch());
            x.put("is_classic", m.isClassic());
            x.put("assignment", assignment(m.assignment()));
            x.put("target_assignment", assignment(m.targetAssignment()));
            members.add(x);
        }
        members.sort((a, b) -> String.valueOf(a.get("client_id")).compareTo(String.valueOf(b.get("client_id"))));
        g.put("members", members);
        return g;
    }
}
