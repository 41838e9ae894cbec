package kwire.capture;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * A share-group member in its own JVM, so that it can be killed with SIGKILL while it holds
 * records: explicit mode, it subscribes, polls until it gets records, writes them down, prints
 * "HELD offsets" on stdout and then holds them (never acknowledges, never polls again) until it is
 * killed.
 *
 * <p>java kwire.capture.ShareMember BOOTSTRAP CLIENT_ID GROUP TOPIC EVENTS_FILE MAX_POLL_RECORDS
 */
public final class ShareMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String clientId = args[1];
        String group = args[2];
        String topic = args[3];
        Path events = Path.of(args[4]);
        String maxPoll = args[5];
        try (Truth truth = new Truth(events, "member-" + clientId)) {
            truth.event(clientId, "process_started", "pid", ProcessHandle.current().pid());
            ShareMemberClient m =
                    new ShareMemberClient(
                            truth,
                            bootstrap,
                            clientId,
                            group,
                            true,
                            Map.of(
                                    "max.poll.records", maxPoll,
                                    "share.acquire.mode", "record_limit"));
            m.subscribe(topic);
            System.out.println("SUBSCRIBED");
            System.out.flush();
            List<ConsumerRecord<String, String>> got = List.of();
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.isEmpty() && System.currentTimeMillis() < deadline) {
                got = m.poll(500);
            }
            List<Long> offsets = new ArrayList<>();
            got.forEach(r -> offsets.add(r.offset()));
            truth.event(clientId, "holding", "topic", topic, "offsets", offsets);
            System.out.println("HELD " + Truth.json(offsets));
            System.out.flush();
            // Hold the records: no poll, no acknowledgement; the heartbeat thread keeps running.
            Thread.sleep(600_000);
            m.close();
        }
    }
}
