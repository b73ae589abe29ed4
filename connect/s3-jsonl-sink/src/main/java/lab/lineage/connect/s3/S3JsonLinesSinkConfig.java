package lab.lineage.connect.s3;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigDef.Width;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

/**
 * Configuration of {@link S3JsonLinesSinkConnector}. Key names follow the Confluent / Aiven S3 sinks
 * where an equivalent exists, so users can carry their configs over.
 */
public final class S3JsonLinesSinkConfig extends AbstractConfig {

    public static final String S3_BUCKET_NAME = "s3.bucket.name";
    public static final String S3_PREFIX = "s3.prefix";
    public static final String S3_ENDPOINT = "s3.endpoint";
    public static final String S3_PATH_STYLE_ACCESS = "s3.path.style.access";
    public static final String S3_REGION = "s3.region";
    public static final String AWS_ACCESS_KEY_ID = "aws.access.key.id";
    public static final String AWS_SECRET_ACCESS_KEY = "aws.secret.access.key";
    public static final String FLUSH_SIZE = "flush.size";
    public static final String ROTATE_INTERVAL_MS = "rotate.interval.ms";
    public static final String RETRY_BACKOFF_MS = "retry.backoff.ms";

    /** Connect's own error-handling key; read (not defined) so tolerated render failures can be skipped. */
    static final String ERRORS_TOLERANCE = "errors.tolerance";

    private static final String GROUP_S3 = "S3";
    private static final String GROUP_FILES = "Files";

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(S3_BUCKET_NAME, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new BucketNameValidator(),
                    Importance.HIGH, "Target S3 bucket (must already exist).",
                    GROUP_S3, 1, Width.MEDIUM, "Bucket")
            .define(S3_PREFIX, Type.STRING, "", new PrefixValidator(), Importance.MEDIUM,
                    "Key prefix prepended to every object key, e.g. 'archive/'. Objects are written to "
                            + "<prefix>topics/<topic>/partition=<p>/<topic>+<p>+<startOffset>.jsonl. "
                            + "Must not start with '/'; a trailing '/' is added when missing.",
                    GROUP_S3, 2, Width.MEDIUM, "Key prefix")
            .define(S3_ENDPOINT, Type.STRING, null, new EndpointValidator(), Importance.MEDIUM,
                    "Endpoint override for S3-compatible stores (s3proxy, MinIO), e.g. "
                            + "'http://127.0.0.1:9000'. Leave unset for AWS S3.",
                    GROUP_S3, 3, Width.LONG, "Endpoint")
            .define(S3_PATH_STYLE_ACCESS, Type.BOOLEAN, null, Importance.LOW,
                    "Use path-style requests (http://host/bucket/key). Defaults to true when "
                            + S3_ENDPOINT + " is set, false otherwise.",
                    GROUP_S3, 4, Width.SHORT, "Path-style access")
            .define(S3_REGION, Type.STRING, "us-east-1", new ConfigDef.NonEmptyStringWithoutControlChars(),
                    Importance.MEDIUM, "AWS region used for request signing.",
                    GROUP_S3, 5, Width.SHORT, "Region")
            .define(AWS_ACCESS_KEY_ID, Type.STRING, null, Importance.HIGH,
                    "Static access key id. If both this and " + AWS_SECRET_ACCESS_KEY
                            + " are unset, the AWS SDK default credentials chain is used.",
                    GROUP_S3, 6, Width.MEDIUM, "Access key id")
            .define(AWS_SECRET_ACCESS_KEY, Type.PASSWORD, null, Importance.HIGH,
                    "Static secret access key (required together with " + AWS_ACCESS_KEY_ID + ").",
                    GROUP_S3, 7, Width.MEDIUM, "Secret access key")
            .define(FLUSH_SIZE, Type.INT, 100, ConfigDef.Range.atLeast(1), Importance.HIGH,
                    "Number of records per object: an object is uploaded as soon as a topic-partition "
                            + "has buffered this many records. Buffers are held in memory.",
                    GROUP_FILES, 1, Width.SHORT, "Flush size")
            .define(ROTATE_INTERVAL_MS, Type.LONG, 60_000L, ConfigDef.Range.atLeast(0), Importance.HIGH,
                    "Wall-clock rotation: a partition's buffer is uploaded once its oldest record has "
                            + "been buffered for this long, even if no new records arrive. 0 disables "
                            + "time-based rotation (objects are then only written at " + FLUSH_SIZE + ").",
                    GROUP_FILES, 2, Width.SHORT, "Rotate interval (ms)")
            .define(RETRY_BACKOFF_MS, Type.LONG, 5_000L, ConfigDef.Range.atLeast(0), Importance.LOW,
                    "Back-off before Connect retries after a failed S3 upload (the SDK's own retries "
                            + "come first).",
                    GROUP_FILES, 3, Width.SHORT, "Retry back-off (ms)");

    public S3JsonLinesSinkConfig(Map<String, ?> originals) {
        super(CONFIG_DEF, originals, false);
        List<String> problems = crossFieldProblems(this);
        if (!problems.isEmpty()) {
            throw new ConfigException(String.join("; ", problems));
        }
    }

    /** Checks that need more than one key. Also used by {@link S3JsonLinesSinkConnector#validate}. */
    static List<String> crossFieldProblems(AbstractConfig c) {
        List<String> problems = new ArrayList<>();
        String keyId = c.getString(AWS_ACCESS_KEY_ID);
        Password secret = c.getPassword(AWS_SECRET_ACCESS_KEY);
        boolean hasKey = keyId != null && !keyId.isBlank();
        boolean hasSecret = secret != null && secret.value() != null && !secret.value().isEmpty();
        if (hasKey != hasSecret) {
            problems.add("'" + AWS_ACCESS_KEY_ID + "' and '" + AWS_SECRET_ACCESS_KEY
                    + "' must be set together (or both left unset to use the default AWS credentials chain)");
        }
        return problems;
    }

    public String bucket() {
        return getString(S3_BUCKET_NAME).trim();
    }

    /** Normalised prefix: "" or ending in '/'. */
    public String prefix() {
        return normalizePrefix(getString(S3_PREFIX));
    }

    public Optional<URI> endpoint() {
        String e = getString(S3_ENDPOINT);
        return e == null || e.isBlank() ? Optional.empty() : Optional.of(URI.create(e.trim()));
    }

    public boolean pathStyleAccess() {
        Boolean explicit = getBoolean(S3_PATH_STYLE_ACCESS);
        return explicit != null ? explicit : endpoint().isPresent();
    }

    public String region() {
        return getString(S3_REGION).trim();
    }

    public Optional<String> accessKeyId() {
        String k = getString(AWS_ACCESS_KEY_ID);
        return k == null || k.isBlank() ? Optional.empty() : Optional.of(k.trim());
    }

    public Optional<String> secretAccessKey() {
        Password p = getPassword(AWS_SECRET_ACCESS_KEY);
        return p == null || p.value() == null || p.value().isEmpty() ? Optional.empty() : Optional.of(p.value());
    }

    public int flushSize() {
        return getInt(FLUSH_SIZE);
    }

    public long rotateIntervalMs() {
        return getLong(ROTATE_INTERVAL_MS);
    }

    public long retryBackoffMs() {
        return getLong(RETRY_BACKOFF_MS);
    }

    /** True if the connector config says {@code errors.tolerance=all}. */
    public boolean errorsToleranceAll() {
        Object v = originals().get(ERRORS_TOLERANCE);
        return v != null && "all".equals(v.toString().trim().toLowerCase(Locale.ROOT));
    }

    static String normalizePrefix(String raw) {
        if (raw == null) {
            return "";
        }
        String p = raw.trim();
        if (p.isEmpty()) {
            return "";
        }
        return p.endsWith("/") ? p : p + "/";
    }

    // ---------------------------------------------------------------- validators

    static final class BucketNameValidator implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            if (value == null) {
                return; // ConfigDef itself reports the missing required key
            }
            if (value.toString().isBlank()) {
                throw new ConfigException(name, value, "an S3 bucket name is required");
            }
            String b = value.toString().trim();
            // Loose version of the S3 rules: lets dotted/legacy names through, stops obvious mistakes
            // such as passing a URL or a path.
            if (b.length() < 3 || b.length() > 63 || !b.matches("[a-zA-Z0-9][a-zA-Z0-9._-]*[a-zA-Z0-9]")) {
                throw new ConfigException(name, value,
                        "not a valid S3 bucket name (3-63 chars of letters, digits, '.', '-', '_'; "
                                + "no scheme, slashes or key prefix; use " + S3_PREFIX + " for the prefix)");
            }
        }

        @Override
        public String toString() {
            return "S3 bucket name";
        }
    }

    static final class PrefixValidator implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            if (value == null) {
                return;
            }
            String p = value.toString().trim();
            if (p.startsWith("/")) {
                throw new ConfigException(name, value, "must not start with '/'");
            }
            if (p.contains("//")) {
                throw new ConfigException(name, value, "must not contain empty path segments ('//')");
            }
        }

        @Override
        public String toString() {
            return "key prefix such as 'archive/' or empty";
        }
    }

    static final class EndpointValidator implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            if (value == null || value.toString().isBlank()) {
                return;
            }
            String s = value.toString().trim();
            URI uri;
            try {
                uri = new URI(s);
            } catch (URISyntaxException e) {
                throw new ConfigException(name, value, "not a valid URL: " + e.getMessage());
            }
            String scheme = uri.getScheme();
            if (scheme == null || !(scheme.equalsIgnoreCase("http") || scheme.equalsIgnoreCase("https"))) {
                throw new ConfigException(name, value,
                        "must be an absolute http:// or https:// URL, e.g. http://127.0.0.1:9000");
            }
            if (uri.getHost() == null || uri.getHost().isEmpty()) {
                throw new ConfigException(name, value, "URL has no host");
            }
            if (uri.getRawPath() != null && !uri.getRawPath().isEmpty() && !uri.getRawPath().equals("/")) {
                throw new ConfigException(name, value,
                        "must not contain a path (the bucket goes in " + S3_BUCKET_NAME + ")");
            }
            if (uri.getRawQuery() != null || uri.getRawFragment() != null) {
                throw new ConfigException(name, value, "must not contain a query or fragment");
            }
        }

        @Override
        public String toString() {
            return "http(s)://host[:port] or empty";
        }
    }
}
