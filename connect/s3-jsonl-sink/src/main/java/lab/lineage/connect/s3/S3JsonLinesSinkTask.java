package lab.lineage.connect.s3;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Function;
import java.util.function.LongSupplier;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.sink.ErrantRecordReporter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Buffers record values per topic-partition as JSON lines and uploads one object per
 * {@code flush.size} records, or when the oldest buffered record has waited {@code rotate.interval.ms}.
 *
 * <p>Delivery: offsets handed to Connect by {@link #preCommit} never pass a record that is not yet in
 * an uploaded object, so a crash loses nothing (records are re-consumed). Object keys are derived from
 * the first offset of the object, so re-consumed records overwrite the same object rather than
 * duplicating it.
 */
public class S3JsonLinesSinkTask extends SinkTask {

    private static final Logger log = LoggerFactory.getLogger(S3JsonLinesSinkTask.class);

    /** Lower bound for the wake-up interval requested via {@code context.timeout()}. */
    static final long MIN_WAKEUP_MS = 100;

    private final Function<S3JsonLinesSinkConfig, ObjectUploader> uploaderFactory;
    private final LongSupplier clock;

    private S3JsonLinesSinkConfig config;
    private ObjectUploader uploader;
    private JsonLineRenderer renderer;
    private ErrantRecordReporter errantRecordReporter;
    private boolean toleranceAll;
    private String prefix;
    private final Map<TopicPartition, PartitionBuffer> buffers = new HashMap<>();

    private long tombstonesSkipped;
    private long recordsFailed;
    private long objectsUploaded;

    public S3JsonLinesSinkTask() {
        this(S3ObjectUploader::new, System::currentTimeMillis);
    }

    /** For tests: inject storage and clock. */
    S3JsonLinesSinkTask(Function<S3JsonLinesSinkConfig, ObjectUploader> uploaderFactory, LongSupplier clock) {
        this.uploaderFactory = uploaderFactory;
        this.clock = clock;
    }

    @Override
    public String version() {
        return S3JsonLinesSinkConnector.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        config = new S3JsonLinesSinkConfig(props);
        prefix = config.prefix();
        renderer = new JsonLineRenderer();
        toleranceAll = config.errorsToleranceAll();
        errantRecordReporter = null;
        if (context != null) {
            try {
                errantRecordReporter = context.errantRecordReporter();
            } catch (NoSuchMethodError | NoClassDefFoundError e) {
                errantRecordReporter = null; // worker older than Kafka 2.6
            }
        }
        uploader = uploaderFactory.apply(config);
        // Partitions assigned before start() returns are passed to open().
        log.info("Started S3 JSON-lines sink task: bucket={} prefix='{}' endpoint={} pathStyle={} "
                        + "flush.size={} rotate.interval.ms={} errantRecordReporter={}",
                config.bucket(), prefix, config.endpoint().map(Object::toString).orElse("<aws>"),
                config.pathStyleAccess(), config.flushSize(), config.rotateIntervalMs(),
                errantRecordReporter != null);
    }

    @Override
    public void open(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            buffers.put(tp, new PartitionBuffer());
        }
        log.debug("Opened {}", partitions);
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        long now = clock.getAsLong();
        for (SinkRecord record : records) {
            TopicPartition tp = new TopicPartition(record.topic(), record.kafkaPartition());
            PartitionBuffer buffer = buffers.computeIfAbsent(tp, k -> new PartitionBuffer());
            long offset = record.kafkaOffset();
            if (buffer.alreadyProcessed(offset)) {
                // Connect re-delivers the whole batch after a RetriableException from put().
                continue;
            }
            if (record.value() == null) {
                tombstonesSkipped++;
                buffer.skip(offset);
                continue;
            }
            byte[] line;
            try {
                line = renderer.render(record.valueSchema(), record.value());
            } catch (DataException e) {
                handleBadRecord(record, buffer, e);
                continue;
            }
            if (buffer.count() >= config.flushSize()) {
                // A full buffer left over from a failed upload: never grow an object past flush.size.
                upload(tp, buffer, PartitionBuffer.RotationReason.SIZE);
            }
            buffer.append(offset, line, now);
            if (buffer.count() >= config.flushSize()) {
                upload(tp, buffer, PartitionBuffer.RotationReason.SIZE);
            }
        }
        rotateDue(now, true);
        scheduleWakeup(now);
    }

    private void handleBadRecord(SinkRecord record, PartitionBuffer buffer, DataException e) {
        String where = record.topic() + "-" + record.kafkaPartition() + "@" + record.kafkaOffset();
        if (errantRecordReporter != null) {
            // Connect applies errors.tolerance: with 'none' this fails the task, with 'all' the record goes
            // to the DLQ / error log and Connect waits for that write before committing the offset.
            recordsFailed++;
            log.warn("Record {} cannot be rendered as JSON, reporting it to Connect: {}", where, e.getMessage());
            errantRecordReporter.report(record, e);
            buffer.skip(record.kafkaOffset());
        } else if (toleranceAll) {
            recordsFailed++;
            log.warn("Record {} cannot be rendered as JSON; skipped (errors.tolerance=all, no DLQ or error log "
                    + "configured): {}", where, e.getMessage());
            buffer.skip(record.kafkaOffset());
        } else {
            throw new DataException("Record " + where + " cannot be rendered as JSON: " + e.getMessage(), e);
        }
    }

    /** Uploads every buffer that is due. With {@code propagate=false} failures are logged, not thrown. */
    private void rotateDue(long now, boolean propagate) {
        for (Map.Entry<TopicPartition, PartitionBuffer> e : buffers.entrySet()) {
            PartitionBuffer buffer = e.getValue();
            PartitionBuffer.RotationReason reason =
                    buffer.rotationDue(now, config.flushSize(), config.rotateIntervalMs());
            if (!reason.due()) {
                continue;
            }
            try {
                upload(e.getKey(), buffer, reason);
            } catch (RetriableException ex) {
                if (propagate) {
                    throw ex;
                }
                log.warn("Deferred upload for {} failed, will retry on next put(): {}", e.getKey(), ex.getMessage());
            }
        }
    }

    private void upload(TopicPartition tp, PartitionBuffer buffer, PartitionBuffer.RotationReason reason) {
        String key = ObjectKeys.objectKey(prefix, tp.topic(), tp.partition(), buffer.startOffset());
        byte[] body = buffer.contents();
        long started = clock.getAsLong();
        try {
            uploader.put(key, body);
        } catch (RetriableException e) {
            if (context != null) {
                context.timeout(config.retryBackoffMs());
            }
            throw e;
        } catch (RuntimeException e) {
            if (context != null) {
                context.timeout(config.retryBackoffMs());
            }
            throw new RetriableException("Upload of " + key + " failed: " + e, e);
        }
        objectsUploaded++;
        log.info("Uploaded s3://{}/{} ({} records, offsets {}..{}, {} bytes, rotation={}, {} ms); "
                        + "task totals: objects={} tombstonesSkipped={} recordsFailed={}",
                config.bucket(), key, buffer.count(), buffer.startOffset(), buffer.lastOffset(), body.length,
                reason, clock.getAsLong() - started, objectsUploaded, tombstonesSkipped, recordsFailed);
        buffer.markUploaded();
        if (context != null) {
            // Commit promptly after an upload: narrows the window in which a crash re-consumes records that
            // are already stored (which would then be re-uploaded under the same keys).
            context.requestCommit();
        }
    }

    /** Ask Connect to call put() again (possibly with no records) when the next time rotation is due. */
    private void scheduleWakeup(long now) {
        if (context == null || config.rotateIntervalMs() <= 0) {
            return;
        }
        long next = -1;
        for (PartitionBuffer b : buffers.values()) {
            long wait = b.msUntilTimeRotation(now, config.rotateIntervalMs());
            if (wait >= 0 && (next < 0 || wait < next)) {
                next = wait;
            }
        }
        if (next >= 0) {
            context.timeout(Math.max(MIN_WAKEUP_MS, next));
        }
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> preCommit(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
        // Time rotation also happens here, so it does not depend on put() being called. Failures are not
        // thrown: Connect would rewind the consumer; the upload is retried on the next put() instead.
        rotateDue(clock.getAsLong(), false);
        Map<TopicPartition, OffsetAndMetadata> safe = new HashMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : currentOffsets.entrySet()) {
            TopicPartition tp = entry.getKey();
            PartitionBuffer buffer = buffers.get(tp);
            if (buffer == null || buffer.isEmpty()) {
                // Nothing buffered: every record Connect consumed was uploaded, skipped, or never reached put()
                // because the converter failed and Connect's error handling (DLQ) took it. Commit Connect's
                // position, so such records are not dead-lettered again after a restart.
                safe.put(tp, entry.getValue());
                continue;
            }
            long offset = buffer.committableOffset();
            if (offset >= 0) {
                safe.put(tp, new OffsetAndMetadata(offset));
            }
        }
        log.debug("preCommit offsets {}", safe);
        return safe;
    }

    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
        // Not used: preCommit() is overridden and decides what is committed.
    }

    @Override
    public void close(Collection<TopicPartition> partitions) {
        // Un-uploaded records of revoked partitions are dropped; their offsets were never committed, so the
        // next owner re-consumes them from the start of the buffer and writes the same object key.
        for (TopicPartition tp : partitions) {
            PartitionBuffer b = buffers.remove(tp);
            if (b != null && !b.isEmpty()) {
                log.info("Closing {} with {} un-uploaded records (offsets {}..{}); they will be re-consumed",
                        tp, b.count(), b.startOffset(), b.lastOffset());
            }
        }
    }

    @Override
    public void stop() {
        buffers.clear();
        if (uploader != null) {
            try {
                uploader.close();
            } catch (RuntimeException e) {
                log.warn("Error closing S3 client", e);
            }
            uploader = null;
        }
        log.info("Stopped S3 JSON-lines sink task: objects={} tombstonesSkipped={} recordsFailed={}",
                objectsUploaded, tombstonesSkipped, recordsFailed);
    }

    // Visible for tests.
    long tombstonesSkipped() {
        return tombstonesSkipped;
    }

    long recordsFailed() {
        return recordsFailed;
    }
}
