package lab.lineage.connect.s3;

/**
 * Object key layout:
 * {@code <prefix>topics/<topic>/partition=<p>/<topic>+<p>+<startOffset, 20 digits>.jsonl}.
 *
 * <p>The key depends only on the topic-partition and the offset of the first record in the object,
 * so re-uploading the same batch after a retry or task restart overwrites the same object instead of
 * creating a duplicate. Zero-padding makes lexicographic listing order equal offset order.
 */
public final class ObjectKeys {

    public static final String EXTENSION = ".jsonl";

    private ObjectKeys() {
    }

    /** Directory-like prefix of a topic-partition, e.g. {@code archive/topics/orders/partition=0/}. */
    public static String partitionPrefix(String normalizedPrefix, String topic, int partition) {
        return normalizedPrefix + "topics/" + topic + "/partition=" + partition + "/";
    }

    public static String objectKey(String normalizedPrefix, String topic, int partition, long startOffset) {
        if (startOffset < 0) {
            throw new IllegalArgumentException("startOffset must be >= 0, was " + startOffset);
        }
        return partitionPrefix(normalizedPrefix, topic, partition)
                + topic + '+' + partition + '+' + String.format("%020d", startOffset) + EXTENSION;
    }
}
