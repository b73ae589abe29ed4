package lab.lineage.connect.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigValue;
import org.junit.jupiter.api.Test;

class S3JsonLinesSinkConfigTest {

    private static Map<String, String> base() {
        Map<String, String> m = new HashMap<>();
        m.put("s3.bucket.name", "orders-archive");
        return m;
    }

    private static String error(Map<String, String> props) {
        return assertThrows(ConfigException.class, () -> new S3JsonLinesSinkConfig(props)).getMessage();
    }

    @Test
    void defaults() {
        S3JsonLinesSinkConfig c = new S3JsonLinesSinkConfig(base());
        assertEquals("orders-archive", c.bucket());
        assertEquals("", c.prefix());
        assertTrue(c.endpoint().isEmpty());
        assertFalse(c.pathStyleAccess(), "AWS proper: virtual-host style");
        assertEquals("us-east-1", c.region());
        assertEquals(100, c.flushSize());
        assertEquals(60_000L, c.rotateIntervalMs());
        assertTrue(c.accessKeyId().isEmpty());
        assertFalse(c.errorsToleranceAll());
    }

    @Test
    void endpointImpliesPathStyleUnlessOverridden() {
        Map<String, String> p = base();
        p.put("s3.endpoint", "http://127.0.0.1:19000");
        p.put("s3.prefix", "lab");
        assertTrue(new S3JsonLinesSinkConfig(p).pathStyleAccess());
        assertEquals("lab/", new S3JsonLinesSinkConfig(p).prefix());
        p.put("s3.path.style.access", "false");
        assertFalse(new S3JsonLinesSinkConfig(p).pathStyleAccess());
    }

    @Test
    void missingBucket() {
        String msg = error(new HashMap<>());
        assertTrue(msg.contains("s3.bucket.name"), msg);
        assertTrue(msg.contains("no default value"), msg);
    }

    @Test
    void badBucket() {
        Map<String, String> p = base();
        p.put("s3.bucket.name", "s3://orders-archive/x");
        String msg = error(p);
        assertTrue(msg.contains("s3.bucket.name") && msg.contains("not a valid S3 bucket name"), msg);
    }

    @Test
    void badEndpoints() {
        for (String bad : List.of("127.0.0.1:9000", "ftp://host", "http://", "http://h:9/bucket", "not a url")) {
            Map<String, String> p = base();
            p.put("s3.endpoint", bad);
            String msg = error(p);
            assertTrue(msg.contains("s3.endpoint"), bad + " -> " + msg);
        }
    }

    @Test
    void nonPositiveFlushSize() {
        for (String bad : List.of("0", "-5")) {
            Map<String, String> p = base();
            p.put("flush.size", bad);
            String msg = error(p);
            assertTrue(msg.contains("flush.size") && msg.contains("at least 1"), msg);
        }
        Map<String, String> p = base();
        p.put("rotate.interval.ms", "-1");
        assertTrue(error(p).contains("rotate.interval.ms"));
    }

    @Test
    void credentialsMustBePaired() {
        Map<String, String> p = base();
        p.put("aws.access.key.id", "lineage");
        String msg = error(p);
        assertTrue(msg.contains("must be set together"), msg);
        p.put("aws.secret.access.key", "lineage-secret");
        S3JsonLinesSinkConfig c = new S3JsonLinesSinkConfig(p);
        assertEquals("lineage-secret", c.secretAccessKey().orElseThrow());
        assertFalse(c.toString().contains("lineage-secret"), "password must not leak via toString");
    }

    @Test
    void connectorValidateReportsPerKeyErrors() {
        Map<String, String> p = base();
        p.put("flush.size", "0");
        p.put("s3.endpoint", "localhost:9000");
        Config result = new S3JsonLinesSinkConnector().validate(p);
        Map<String, List<String>> errors = result.configValues().stream()
                .filter(v -> !v.errorMessages().isEmpty())
                .collect(Collectors.toMap(ConfigValue::name, ConfigValue::errorMessages));
        assertEquals(2, errors.size(), errors.toString());
        assertTrue(errors.containsKey("flush.size"));
        assertTrue(errors.containsKey("s3.endpoint"));

        Map<String, String> q = base();
        q.put("aws.secret.access.key", "s");
        Config r2 = new S3JsonLinesSinkConnector().validate(q);
        assertTrue(r2.configValues().stream().anyMatch(v -> v.name().equals("aws.access.key.id")
                && !v.errorMessages().isEmpty()));
    }

    @Test
    void errorsToleranceIsRead() {
        Map<String, String> p = base();
        p.put("errors.tolerance", "all");
        assertTrue(new S3JsonLinesSinkConfig(p).errorsToleranceAll());
    }
}
