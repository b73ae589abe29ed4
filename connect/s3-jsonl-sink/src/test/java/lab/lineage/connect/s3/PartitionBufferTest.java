package lab.lineage.connect.s3;

import static lab.lineage.connect.s3.PartitionBuffer.RotationReason.NONE;
import static lab.lineage.connect.s3.PartitionBuffer.RotationReason.SIZE;
import static lab.lineage.connect.s3.PartitionBuffer.RotationReason.TIME;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

class PartitionBufferTest {

    private static byte[] line(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void rotationDecision() {
        // empty buffer never rotates, however old
        assertEquals(NONE, PartitionBuffer.rotationDue(0, 0, 1_000_000, 100, 5_000));
        // size reached
        assertEquals(SIZE, PartitionBuffer.rotationDue(100, 1_000, 1_000, 100, 5_000));
        assertEquals(SIZE, PartitionBuffer.rotationDue(101, 1_000, 1_000, 100, 5_000));
        // size wins over time when both are due
        assertEquals(SIZE, PartitionBuffer.rotationDue(100, 0, 10_000, 100, 5_000));
        // time: exactly at the interval is due, one ms before is not
        assertEquals(NONE, PartitionBuffer.rotationDue(50, 1_000, 5_999, 100, 5_000));
        assertEquals(TIME, PartitionBuffer.rotationDue(50, 1_000, 6_000, 100, 5_000));
        // time rotation disabled
        assertEquals(NONE, PartitionBuffer.rotationDue(50, 0, Long.MAX_VALUE / 2, 100, 0));
        // flush.size=1 uploads every record
        assertEquals(SIZE, PartitionBuffer.rotationDue(1, 0, 0, 1, 0));
    }

    @Test
    void bufferTracksOffsetsAndContents() {
        PartitionBuffer b = new PartitionBuffer();
        assertEquals(-1, b.committableOffset());
        b.append(10, line("{\"a\":1}"), 1_000);
        b.append(11, line("{\"a\":2}"), 2_000);
        assertEquals(2, b.count());
        assertEquals(10, b.startOffset());
        assertEquals(11, b.lastOffset());
        assertEquals(1_000, b.firstBufferedAtMs(), "age counts from the oldest buffered record");
        assertArrayEquals(line("{\"a\":1}\n{\"a\":2}\n"), b.contents());
        assertEquals(10, b.committableOffset(), "buffered records are not committable");
        assertEquals(4_000, b.msUntilTimeRotation(2_000, 5_000));
        assertEquals(TIME, b.rotationDue(6_000, 100, 5_000));

        b.markUploaded();
        assertTrue(b.isEmpty());
        assertEquals(12, b.committableOffset());
        assertEquals(-1, b.msUntilTimeRotation(7_000, 5_000));
        assertEquals(NONE, b.rotationDue(100_000, 100, 5_000));

        // next object starts at the next offset with a fresh age
        b.append(12, line("x"), 9_000);
        assertEquals(12, b.startOffset());
        assertEquals(9_000, b.firstBufferedAtMs());
        assertArrayEquals(line("x\n"), b.contents());
    }

    @Test
    void skippedRecordsAdvanceCommitOnlyWhenNothingBuffered() {
        PartitionBuffer b = new PartitionBuffer();
        b.skip(0); // tombstone first
        assertEquals(1, b.committableOffset());
        b.append(1, line("a"), 0);
        b.skip(2); // tombstone inside a pending object
        assertEquals(1, b.committableOffset());
        b.markUploaded();
        assertEquals(3, b.committableOffset(), "skipped offset after the last line is covered by the upload");
    }

    @Test
    void redeliveredOffsetsAreRecognised() {
        PartitionBuffer b = new PartitionBuffer();
        assertFalse(b.alreadyProcessed(0));
        b.append(5, line("a"), 0);
        b.append(6, line("b"), 0);
        assertTrue(b.alreadyProcessed(5));
        assertTrue(b.alreadyProcessed(6));
        assertFalse(b.alreadyProcessed(7));
        assertFalse(b.alreadyProcessed(9), "gaps (compaction, transaction markers) are fine");
    }
}
