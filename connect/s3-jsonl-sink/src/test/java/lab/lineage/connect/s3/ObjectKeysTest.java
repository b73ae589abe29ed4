package lab.lineage.connect.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class ObjectKeysTest {

    @Test
    void keyLayoutWithoutPrefix() {
        assertEquals("topics/orders/partition=0/orders+0+00000000000000000000.jsonl",
                ObjectKeys.objectKey("", "orders", 0, 0));
    }

    @Test
    void keyLayoutWithPrefixAndLargeOffset() {
        assertEquals("archive/topics/shop.orders-v1/partition=12/shop.orders-v1+12+00000000009876543210.jsonl",
                ObjectKeys.objectKey("archive/", "shop.orders-v1", 12, 9_876_543_210L));
        assertEquals("topics/t/partition=0/t+0+09223372036854775807.jsonl",
                ObjectKeys.objectKey("", "t", 0, Long.MAX_VALUE));
    }

    @Test
    void prefixIsNormalised() {
        assertEquals("", S3JsonLinesSinkConfig.normalizePrefix(null));
        assertEquals("", S3JsonLinesSinkConfig.normalizePrefix("  "));
        assertEquals("archive/", S3JsonLinesSinkConfig.normalizePrefix("archive"));
        assertEquals("a/b/", S3JsonLinesSinkConfig.normalizePrefix("a/b/"));
    }

    @Test
    void keysSortInOffsetOrder() {
        List<String> keys = new ArrayList<>();
        for (long o : new long[] {0, 9, 10, 99, 100, 1_000_000}) {
            keys.add(ObjectKeys.objectKey("", "t", 3, o));
        }
        List<String> sorted = new ArrayList<>(keys);
        sorted.sort(null);
        assertEquals(keys, sorted);
    }

    @Test
    void negativeOffsetRejected() {
        assertThrows(IllegalArgumentException.class, () -> ObjectKeys.objectKey("", "t", 0, -1));
    }

    @Test
    void sameStartOffsetGivesSameKey() {
        assertTrue(ObjectKeys.objectKey("p/", "t", 1, 200).equals(ObjectKeys.objectKey("p/", "t", 1, 200)));
    }
}
