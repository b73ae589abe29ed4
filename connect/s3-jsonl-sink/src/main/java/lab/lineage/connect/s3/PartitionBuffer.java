package lab.lineage.connect.s3;

import java.io.ByteArrayOutputStream;

/**
 * In-memory state of one assigned topic-partition: the lines buffered for the next object and the
 * offset bookkeeping that decides what may be committed.
 *
 * <p>Invariant: every offset below {@link #committableOffset()} is either in an uploaded object or was
 * deliberately skipped (tombstone / tolerated bad record). Pure logic, no I/O, single-threaded.
 */
final class PartitionBuffer {

    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream(16 * 1024);
    private int count;
    private long startOffset = -1;
    private long lastOffset = -1;
    private long firstBufferedAtMs = -1;

    /** Offset of the next record we expect; -1 until the first record is seen. */
    private long nextOffset = -1;
    /** Offset safe to commit; -1 if nothing has been processed yet for this partition. */
    private long committable = -1;

    /**
     * @return true if {@code offset} was already processed (e.g. Connect re-delivered a batch after a
     *     RetriableException) and must be ignored.
     */
    boolean alreadyProcessed(long offset) {
        return nextOffset >= 0 && offset < nextOffset;
    }

    void append(long offset, byte[] line, long nowMs) {
        if (count == 0) {
            startOffset = offset;
            firstBufferedAtMs = nowMs;
            bytes.reset();
        }
        bytes.write(line, 0, line.length);
        bytes.write('\n');
        count++;
        lastOffset = offset;
        nextOffset = offset + 1;
    }

    /** A record that produces no line (tombstone, tolerated failure) but whose offset is consumed. */
    void skip(long offset) {
        nextOffset = offset + 1;
        if (count == 0) {
            committable = nextOffset;
        }
    }

    boolean isEmpty() {
        return count == 0;
    }

    int count() {
        return count;
    }

    long startOffset() {
        return startOffset;
    }

    long lastOffset() {
        return lastOffset;
    }

    long firstBufferedAtMs() {
        return firstBufferedAtMs;
    }

    byte[] contents() {
        return bytes.toByteArray();
    }

    int sizeBytes() {
        return bytes.size();
    }

    /** Called after the buffered object has been durably uploaded. */
    void markUploaded() {
        count = 0;
        startOffset = -1;
        lastOffset = -1;
        firstBufferedAtMs = -1;
        bytes.reset();
        committable = nextOffset;
    }

    /**
     * Offset that may be committed to Kafka: the first offset of the still-buffered records, or, with an
     * empty buffer, the offset after the last processed record. -1 if nothing was processed yet.
     */
    long committableOffset() {
        return count > 0 ? startOffset : committable;
    }

    /** Pure rotation decision: size first, then the wall-clock age of the oldest buffered record. */
    static RotationReason rotationDue(int count, long firstBufferedAtMs, long nowMs, int flushSize,
                                      long rotateIntervalMs) {
        if (count <= 0) {
            return RotationReason.NONE;
        }
        if (count >= flushSize) {
            return RotationReason.SIZE;
        }
        if (rotateIntervalMs > 0 && nowMs - firstBufferedAtMs >= rotateIntervalMs) {
            return RotationReason.TIME;
        }
        return RotationReason.NONE;
    }

    RotationReason rotationDue(long nowMs, int flushSize, long rotateIntervalMs) {
        return rotationDue(count, firstBufferedAtMs, nowMs, flushSize, rotateIntervalMs);
    }

    /** Milliseconds until time-based rotation is due, or -1 if there is nothing to wait for. */
    long msUntilTimeRotation(long nowMs, long rotateIntervalMs) {
        if (count == 0 || rotateIntervalMs <= 0) {
            return -1;
        }
        return Math.max(0, firstBufferedAtMs + rotateIntervalMs - nowMs);
    }

    enum RotationReason {
        NONE, SIZE, TIME;

        boolean due() {
            return this != NONE;
        }
    }
}
