package lab.lineage.connect.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.metrics.PluginMetrics;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.sink.ErrantRecordReporter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTaskContext;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Task behaviour against an in-memory object store and a fake clock. */
class S3JsonLinesSinkTaskTest {

    private static final TopicPartition TP0 = new TopicPartition("orders", 0);
    private static final TopicPartition TP1 = new TopicPartition("orders", 1);

    private final Map<String, String> store = new LinkedHashMap<>();
    private final List<String> uploadLog = new ArrayList<>();
    private final AtomicLong now = new AtomicLong(1_000_000);
    private boolean failUploads;
    private FakeContext context;
    private S3JsonLinesSinkTask task;

    private final ObjectUploader memoryUploader = new ObjectUploader() {
        @Override
        public void put(String key, byte[] body) {
            if (failUploads) {
                throw new RetriableException("simulated S3 outage");
            }
            store.put(key, new String(body, StandardCharsets.UTF_8));
            uploadLog.add(key);
        }

        @Override
        public void close() {
        }
    };

    @BeforeEach
    void setUp() {
        context = new FakeContext(null);
        task = newTask(context, Map.of());
    }

    private S3JsonLinesSinkTask newTask(FakeContext ctx, Map<String, String> extra) {
        S3JsonLinesSinkTask t = new S3JsonLinesSinkTask(c -> memoryUploader, now::get);
        t.initialize(ctx);
        Map<String, String> props = new HashMap<>();
        props.put("s3.bucket.name", "orders-archive");
        props.put("s3.prefix", "lab/");
        props.put("flush.size", "100");
        props.put("rotate.interval.ms", "5000");
        props.putAll(extra);
        t.start(props);
        t.open(List.of(TP0, TP1));
        return t;
    }

    private static SinkRecord rec(TopicPartition tp, long offset, Object value) {
        return new SinkRecord(tp.topic(), tp.partition(), null, null, null, value, offset);
    }

    private static List<SinkRecord> orders(TopicPartition tp, long from, long toExclusive) {
        List<SinkRecord> out = new ArrayList<>();
        for (long o = from; o < toExclusive; o++) {
            out.add(rec(tp, o, Map.of("order_id", o)));
        }
        return out;
    }

    /** What Connect hands preCommit: per assigned partition, the offset after the last record put(). */
    private final Map<TopicPartition, OffsetAndMetadata> consumed = new HashMap<>();

    private void put(List<SinkRecord> records) {
        task.put(records);
        for (SinkRecord r : records) {
            consumed.put(new TopicPartition(r.topic(), r.kafkaPartition()), new OffsetAndMetadata(r.kafkaOffset() + 1));
        }
    }

    private void close(List<TopicPartition> partitions) {
        task.close(partitions);
        partitions.forEach(consumed::remove);
    }

    private Map<TopicPartition, OffsetAndMetadata> commit() {
        return task.preCommit(new HashMap<>(consumed));
    }

    private long committed(TopicPartition tp) {
        OffsetAndMetadata o = commit().get(tp);
        return o == null ? -1 : o.offset();
    }

    private int lines(String key) {
        return store.get(key).split("\n", -1).length - 1;
    }

    @Test
    void sizeThenTimeRotation() {
        put(orders(TP0, 0, 250));
        assertEquals(List.of("lab/topics/orders/partition=0/orders+0+00000000000000000000.jsonl",
                "lab/topics/orders/partition=0/orders+0+00000000000000000100.jsonl"), uploadLog);
        assertEquals(100, lines(uploadLog.get(0)));
        assertTrue(store.get(uploadLog.get(0)).startsWith("{\"order_id\":0}\n{\"order_id\":1}\n"));
        assertEquals(200, committed(TP0), "50 buffered records are not committable");
        assertEquals(2, context.commitRequests);
        assertEquals(5_000, context.lastTimeout, "wake-up requested for the time rotation");

        now.addAndGet(4_999);
        put(List.of());
        assertEquals(2, uploadLog.size());
        assertEquals(S3JsonLinesSinkTask.MIN_WAKEUP_MS, context.lastTimeout, "wake-up floor");

        now.addAndGet(1);
        put(List.of()); // the wake-up: empty put() triggers time rotation
        assertEquals(3, uploadLog.size());
        assertEquals(50, lines("lab/topics/orders/partition=0/orders+0+00000000000000000200.jsonl"));
        assertEquals(250, committed(TP0));
        assertEquals(-1, committed(TP1), "nothing seen on TP1: nothing to commit");
    }

    @Test
    void preCommitAlsoRotatesByTime() {
        put(orders(TP1, 10, 15));
        assertEquals(10, committed(TP1));
        now.addAndGet(5_000);
        assertEquals(15, committed(TP1));
        assertEquals(List.of("lab/topics/orders/partition=1/orders+1+00000000000000000010.jsonl"), uploadLog);
    }

    @Test
    void tombstonesAreSkippedAndCounted() {
        List<SinkRecord> batch = new ArrayList<>(orders(TP0, 0, 3));
        batch.add(rec(TP0, 3, null));
        batch.addAll(orders(TP0, 4, 6));
        batch.add(rec(TP0, 6, null));
        put(batch);
        now.addAndGet(5_000);
        assertEquals(7, committed(TP0));
        assertEquals(5, lines(uploadLog.get(0)));
        assertEquals(2, task.tombstonesSkipped());
    }

    @Test
    void s3FailureIsRetriableAndRedeliveryDoesNotDuplicate() {
        failUploads = true;
        List<SinkRecord> batch = orders(TP0, 0, 150);
        RetriableException e = assertThrows(RetriableException.class, () -> task.put(batch));
        assertTrue(e.getMessage().contains("simulated"));
        assertEquals(5_000, context.lastTimeout, "retry.backoff.ms handed to Connect");
        assertTrue(committed(TP0) <= 0, "nothing uploaded, nothing committed");

        // Connect re-delivers the same batch after the back-off.
        failUploads = false;
        put(batch);
        assertEquals(1, uploadLog.size());
        assertEquals(100, lines(uploadLog.get(0)));
        now.addAndGet(5_000);
        put(List.of());
        assertEquals(50, lines(uploadLog.get(1)));
        assertEquals(150, committed(TP0));
    }

    @Test
    void failedTimeRotationInPreCommitIsDeferredNotThrown() {
        put(orders(TP0, 0, 10));
        failUploads = true;
        now.addAndGet(6_000);
        assertEquals(0, committed(TP0));
        failUploads = false;
        put(List.of());
        assertEquals(10, committed(TP0));
    }

    @Test
    void restartReusesKeysSoNothingIsDuplicated() {
        put(orders(TP0, 0, 130));
        long resumeFrom = committed(TP0);
        assertEquals(100, resumeFrom);
        task.close(List.of(TP0, TP1));
        task.stop();

        // New task instance re-consumes from the committed offset.
        task = newTask(new FakeContext(null), Map.of());
        put(orders(TP0, resumeFrom, 130));
        now.addAndGet(5_000);
        put(List.of());
        assertEquals(List.of("lab/topics/orders/partition=0/orders+0+00000000000000000000.jsonl",
                "lab/topics/orders/partition=0/orders+0+00000000000000000100.jsonl"), List.copyOf(store.keySet()));
        long total = store.values().stream().mapToLong(s -> s.split("\n").length).sum();
        assertEquals(130, total);
    }

    @Test
    void partitionsAreBufferedIndependently() {
        List<SinkRecord> batch = new ArrayList<>();
        for (long o = 0; o < 100; o++) {
            batch.add(rec(TP0, o, Map.of("p", 0)));
            batch.add(rec(TP1, o + 1000, Map.of("p", 1)));
        }
        put(batch);
        assertEquals(Set.of("lab/topics/orders/partition=0/orders+0+00000000000000000000.jsonl",
                "lab/topics/orders/partition=1/orders+1+00000000000000001000.jsonl"), store.keySet());
    }

    @Test
    void unrenderableRecordFailsTaskWithoutReporter() {
        List<SinkRecord> batch = List.of(rec(TP0, 0, new Object()));
        DataException e = assertThrows(DataException.class, () -> task.put(batch));
        assertTrue(e.getMessage().contains("orders-0@0"), e.getMessage());
    }

    @Test
    void unrenderableRecordGoesToErrantRecordReporter() {
        List<SinkRecord> reported = new ArrayList<>();
        task = newTask(new FakeContext((r, err) -> {
            reported.add(r);
            return CompletableFuture.completedFuture(null);
        }), Map.of());
        put(List.of(rec(TP0, 0, Map.of("ok", 1)), rec(TP0, 1, new Object()), rec(TP0, 2, Map.of("ok", 2))));
        now.addAndGet(5_000);
        put(List.of());
        assertEquals(1, reported.size());
        assertEquals(1L, reported.get(0).kafkaOffset());
        assertEquals("{\"ok\":1}\n{\"ok\":2}\n", store.values().iterator().next());
        assertEquals(3, committed(TP0));
        assertEquals(1, task.recordsFailed());
    }

    @Test
    void unrenderableRecordSkippedWithToleranceAllAndNoReporter() {
        task = newTask(new FakeContext(null), Map.of("errors.tolerance", "all"));
        put(List.of(rec(TP0, 0, new Object()), rec(TP0, 1, Map.of("ok", 1))));
        now.addAndGet(5_000);
        assertEquals(2, committed(TP0));
        assertEquals(1, task.recordsFailed());
    }

    @Test
    void recordsConnectDeadLetteredBeforePutAreCommittedPastWhenNothingIsBuffered() {
        put(orders(TP0, 0, 100)); // flush.size: uploaded at once
        // offsets 100 and 101 failed in the converter: Connect sent them to the DLQ, put() never saw them
        consumed.put(TP0, new OffsetAndMetadata(102));
        assertEquals(102, committed(TP0), "a restart must not dead-letter them again");
        put(orders(TP0, 102, 110));
        assertEquals(102, committed(TP0), "buffered records still hold the committed offset back");
    }

    @Test
    void closedPartitionsDropTheirBuffers() {
        put(orders(TP0, 0, 10));
        put(orders(TP1, 0, 10));
        close(List.of(TP0));
        now.addAndGet(5_000);
        Map<TopicPartition, OffsetAndMetadata> offsets = commit();
        assertEquals(Set.of(TP1), offsets.keySet());
        assertEquals(List.of("lab/topics/orders/partition=1/orders+1+00000000000000000000.jsonl"), uploadLog);
    }

    /** Minimal SinkTaskContext recording what the task asks of the worker. */
    private static final class FakeContext implements SinkTaskContext {
        private final ErrantRecordReporter reporter;
        long lastTimeout = -1;
        int commitRequests;

        FakeContext(ErrantRecordReporter reporter) {
            this.reporter = reporter;
        }

        @Override
        public Map<String, String> configs() {
            return Map.of();
        }

        @Override
        public void offset(Map<TopicPartition, Long> offsets) {
        }

        @Override
        public void offset(TopicPartition tp, long offset) {
        }

        @Override
        public void timeout(long timeoutMs) {
            lastTimeout = timeoutMs;
        }

        @Override
        public Set<TopicPartition> assignment() {
            return Set.of(TP0, TP1);
        }

        @Override
        public void pause(TopicPartition... partitions) {
        }

        @Override
        public void resume(TopicPartition... partitions) {
        }

        @Override
        public void requestCommit() {
            commitRequests++;
        }

        @Override
        public ErrantRecordReporter errantRecordReporter() {
            return reporter;
        }

        @Override
        public PluginMetrics pluginMetrics() {
            return null;
        }
    }
}
