package lab.lineage.connect.s3;

/** Minimal storage abstraction so the task logic can be unit-tested without S3. */
interface ObjectUploader extends AutoCloseable {

    /**
     * Durably stores {@code body} under {@code key} (replacing any existing object). Returns only once
     * the store has acknowledged the write.
     *
     * @throws org.apache.kafka.connect.errors.RetriableException on any storage failure
     */
    void put(String key, byte[] body);

    @Override
    void close();
}
