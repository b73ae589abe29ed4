package lab.lineage.orders.lineage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import lab.lineage.orders.DecodeSettings;
import lab.lineage.orders.flink.DecodeOrderFunction;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.functions.ScalarFunction;
import org.junit.jupiter.api.Test;

/**
 * Column lineage of hand-written statements, compiled by Flink's planner: every expected origin is written out here
 * from the SQL. Origins are compared without their table options (always {@code {"connector": "datagen"}} here),
 * except in the iceberg-ingestion statement, compared whole.
 */
class PlanLineageTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String SRC = "`default_catalog`.`default_database`.`src`";
    static final String SRC2 = "`default_catalog`.`default_database`.`src2`";

    /** A user scalar function, registered as {@code shout}. */
    public static class Shout extends ScalarFunction {
        public String eval(String s) {
            return s + "!";
        }
    }

    static TableEnvironment tables() {
        TableEnvironment t = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        t.executeSql("CREATE TEMPORARY TABLE src (a INT, b STRING, c DOUBLE, ts TIMESTAMP(3),"
                + " WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen')");
        t.executeSql("CREATE TEMPORARY TABLE src2 (id INT, name STRING) WITH ('connector' = 'datagen')");
        t.executeSql("CREATE TEMPORARY TABLE snk (x INT, y STRING, z DOUBLE) WITH ('connector' = 'blackhole')");
        t.executeSql("CREATE TEMPORARY TABLE agg (y STRING, s DOUBLE, n BIGINT) WITH ('connector' = 'blackhole')");
        return t;
    }

    static JsonNode lineage(TableEnvironment t, String... inserts) throws Exception {
        StatementSet set = t.createStatementSet();
        for (String insert : inserts) {
            set.addInsertSql(insert);
        }
        return JSON.readTree(PlanLineage.ofStatementSet(t, set, Map.of()));
    }

    /** The one sink's columns and INDIRECT origins, origins without their options. */
    static void assertSink(JsonNode lineage, String columns, String indirect) throws Exception {
        assertEquals(1, lineage.get("sinks").size());
        JsonNode sink = lineage.get("sinks").get(0);
        sink.get("columns").forEach(PlanLineageTest::withoutOptions);
        withoutOptions(sink.get("indirect"));
        assertEquals(JSON.readTree(columns), sink.get("columns"));
        assertEquals(names(JSON.readTree(columns)), names(sink.get("columns")), "the sink's column order");
        assertEquals(JSON.readTree(indirect), sink.get("indirect"));
    }

    static List<String> names(JsonNode object) {
        List<String> names = new ArrayList<>();
        object.fieldNames().forEachRemaining(names::add);
        return names;
    }

    static void withoutOptions(JsonNode origins) {
        origins.forEach(o -> ((ObjectNode) o).remove("options"));
    }

    static String origin(String table, String column, String subtype, String description) {
        return origin(table, column, null, "DIRECT", subtype, description);
    }

    static String origin(String table, String column, String field, String type, String subtype, String description) {
        return "{\"table\": \"" + table + "\", \"column\": \"" + column + "\", \"field\": "
                + (field == null ? "null" : "\"" + field + "\"") + ", \"type\": \"" + type + "\", \"subtype\": \""
                + subtype + "\", \"description\": " + (description == null ? "null" : "\"" + description + "\"")
                + "}";
    }

    @Test
    void projection() throws Exception {
        assertSink(lineage(tables(), "INSERT INTO snk SELECT a, b, c FROM src"),
                "{\"x\": [" + origin(SRC, "a", "IDENTITY", null) + "], \"y\": [" + origin(SRC, "b", "IDENTITY", null)
                        + "], \"z\": [" + origin(SRC, "c", "IDENTITY", null) + "]}",
                "[]");
    }

    @Test
    void renameThroughAViewIntoTargetedColumns() throws Exception {
        TableEnvironment t = tables();
        t.executeSql("CREATE TEMPORARY VIEW renamed AS SELECT a AS ident, b AS label, c AS weight FROM src");
        // y is not written: it is no column of this INSERT; the others come in the table's order
        assertSink(lineage(t, "INSERT INTO snk (z, x) SELECT weight, ident FROM renamed"),
                "{\"x\": [" + origin(SRC, "a", "IDENTITY", null) + "], \"z\": [" + origin(SRC, "c", "IDENTITY", null)
                        + "]}",
                "[]");
    }

    @Test
    void cast() throws Exception {
        assertSink(lineage(tables(), "INSERT INTO snk SELECT a, CAST(a AS STRING), CAST(b AS DOUBLE) FROM src"),
                "{\"x\": [" + origin(SRC, "a", "IDENTITY", null) + "], \"y\": ["
                        + origin(SRC, "a", "TRANSFORMATION", "CAST") + "], \"z\": ["
                        + origin(SRC, "b", "TRANSFORMATION", "CAST") + "]}",
                "[]");
    }

    @Test
    void caseValuesAreDirectAndItsConditionsIndirect() throws Exception {
        assertSink(lineage(tables(), "INSERT INTO snk SELECT CASE WHEN a > 10 THEN a ELSE 0 END,"
                        + " CASE WHEN b = 'x' THEN 'big' ELSE b END, c FROM src"),
                "{\"x\": [" + origin(SRC, "a", "TRANSFORMATION", "CASE") + "], \"y\": ["
                        + origin(SRC, "b", "TRANSFORMATION", "CASE") + "], \"z\": ["
                        + origin(SRC, "c", "IDENTITY", null) + "]}",
                "[" + origin(SRC, "a", null, "INDIRECT", "CONDITIONAL", "CASE(>)") + ", "
                        + origin(SRC, "b", null, "INDIRECT", "CONDITIONAL", "CASE(=)") + "]");
    }

    @Test
    void scalarFunctionsBuiltInAndUserDefined() throws Exception {
        TableEnvironment t = tables();
        t.createTemporarySystemFunction("shout", Shout.class);
        assertSink(lineage(t, "INSERT INTO snk SELECT CHAR_LENGTH(UPPER(b)), shout(b), c * 2 FROM src"),
                "{\"x\": [" + origin(SRC, "b", "TRANSFORMATION", "CHAR_LENGTH(UPPER)") + "], \"y\": ["
                        + origin(SRC, "b", "TRANSFORMATION", "shout") + "], \"z\": ["
                        + origin(SRC, "c", "TRANSFORMATION", "*") + "]}",
                "[]");
    }

    @Test
    void joinKeysAndEachSidesFiltersAreIndirect() throws Exception {
        assertSink(lineage(tables(), "INSERT INTO snk SELECT s.a, s2.name, s.c FROM src s JOIN src2 s2"
                        + " ON s.a = s2.id WHERE s2.name <> 'x'"),
                "{\"x\": [" + origin(SRC, "a", "IDENTITY", null) + "], \"y\": ["
                        + origin(SRC2, "name", "IDENTITY", null) + "], \"z\": [" + origin(SRC, "c", "IDENTITY", null)
                        + "]}",
                "[" + origin(SRC2, "name", null, "INDIRECT", "FILTER", "<>") + ", "
                        + origin(SRC, "a", null, "INDIRECT", "JOIN", "INNER JOIN") + ", "
                        + origin(SRC2, "id", null, "INDIRECT", "JOIN", "INNER JOIN") + "]");
    }

    static final String AGGREGATE = "INSERT INTO agg SELECT b, SUM(c), COUNT(*) FROM src WHERE a > 1 GROUP BY b";
    static final String AGGREGATE_COLUMNS = "{\"y\": [" + origin(SRC, "b", "IDENTITY", null) + "], \"s\": ["
            + origin(SRC, "c", "AGGREGATION", "SUM") + "], \"n\": []}";
    static final String AGGREGATE_INDIRECT = "[" + origin(SRC, "a", null, "INDIRECT", "FILTER", ">") + ", "
            + origin(SRC, "b", null, "INDIRECT", "GROUP_BY", "GROUP BY") + "]";

    @Test
    void aggregation() throws Exception {
        assertSink(lineage(tables(), AGGREGATE), AGGREGATE_COLUMNS, AGGREGATE_INDIRECT);
    }

    @Test
    void twoPhaseAggregationReadsTheSame() throws Exception {
        TableEnvironment t = tables();
        t.getConfig().set("table.exec.mini-batch.enabled", "true");
        t.getConfig().set("table.exec.mini-batch.allow-latency", "1 s");
        t.getConfig().set("table.exec.mini-batch.size", "100");
        String plan = planOf(t, AGGREGATE);
        assertTrue(plan.contains("stream-exec-local-group-aggregate_1"), "mini-batch splits the aggregate");
        assertTrue(plan.contains("stream-exec-global-group-aggregate_1"));
        assertSink(lineage(t, AGGREGATE), AGGREGATE_COLUMNS, AGGREGATE_INDIRECT);
    }

    @Test
    void unionAll() throws Exception {
        assertSink(lineage(tables(), "INSERT INTO snk SELECT a, b, c FROM src"
                        + " UNION ALL SELECT id, name, CAST(id AS DOUBLE) FROM src2"),
                "{\"x\": [" + origin(SRC, "a", "IDENTITY", null) + ", " + origin(SRC2, "id", "IDENTITY", null)
                        + "], \"y\": [" + origin(SRC, "b", "IDENTITY", null) + ", "
                        + origin(SRC2, "name", "IDENTITY", null) + "], \"z\": [" + origin(SRC, "c", "IDENTITY", null)
                        + ", " + origin(SRC2, "id", "TRANSFORMATION", "CAST") + "]}",
                "[]");
    }

    static String planOf(TableEnvironment t, String... inserts) {
        StatementSet set = t.createStatementSet();
        for (String insert : inserts) {
            set.addInsertSql(insert);
        }
        return set.compilePlan().asJsonString();
    }

    @Test
    void anUnknownNodeMakesEveryInputFieldIndirect() throws Exception {
        String plan = planOf(tables(), "INSERT INTO snk SELECT a, b, c FROM src WHERE a > 0");
        assertTrue(plan.contains("\"stream-exec-calc_1\""));
        JsonNode lineage = JSON.readTree(PlanLineage.fromCompiledPlan(
                plan.replace("\"stream-exec-calc_1\"", "\"stream-exec-mystery_7\""), Map.of()));
        // from the plan alone, the temporary sink's columns are named as the query names them
        String any = "[" + origin(SRC, "a", null, "INDIRECT", "UNKNOWN", "stream-exec-mystery_7") + ", "
                + origin(SRC, "b", null, "INDIRECT", "UNKNOWN", "stream-exec-mystery_7") + ", "
                + origin(SRC, "c", null, "INDIRECT", "UNKNOWN", "stream-exec-mystery_7") + ", "
                + origin(SRC, "ts", null, "INDIRECT", "UNKNOWN", "stream-exec-mystery_7") + "]";
        assertSink(lineage, "{\"a\": " + any + ", \"b\": " + any + ", \"c\": " + any + "}", "[]");
    }

    @Test
    void aFilterPushedIntoTheSourceIsIndirect() throws Exception {
        String plan = planOf(tables(), "INSERT INTO snk SELECT a, b, c FROM src");
        // datagen takes no filters: the ability a source that does would get, on the table's first column
        String pushed = plan.replaceFirst("(\"scanTableSource\" : \\{)", "$1 \"abilities\" : [ {\"type\" : "
                + "\"FilterPushDown\", \"predicates\" : [ {\"kind\" : \"CALL\", \"syntax\" : \"BINARY\", "
                + "\"internalName\" : \"\\$>\\$1\", \"operands\" : [ {\"kind\" : \"INPUT_REF\", \"inputIndex\" : 0, "
                + "\"type\" : \"INT\"}, {\"kind\" : \"LITERAL\", \"value\" : 3, \"type\" : \"INT NOT NULL\"} ], "
                + "\"type\" : \"BOOLEAN\"} ]} ],");
        assertTrue(pushed.contains("FilterPushDown"));
        assertSink(JSON.readTree(PlanLineage.fromCompiledPlan(pushed, null)),
                "{\"a\": [" + origin(SRC, "a", "IDENTITY", null) + "], \"b\": [" + origin(SRC, "b", "IDENTITY", null)
                        + "], \"c\": [" + origin(SRC, "c", "IDENTITY", null) + "]}",
                "[" + origin(SRC, "a", null, "INDIRECT", "FILTER", ">") + "]");
    }

    @Test
    void onlyWhitelistedOptionsAreWritten() throws Exception {
        String jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\""
                + " password=\"hunter2\";";
        TableEnvironment t = tables();
        // a permanent table: the plan itself carries its options, secrets included
        t.executeSql("CREATE CATALOG cat WITH ('type' = 'generic_in_memory')");
        t.executeSql("CREATE TABLE cat.`default`.secured (x INT) WITH ('connector' = 'kafka', 'topic' = 'out',"
                + " 'properties.bootstrap.servers' = 'broker:9093', 'format' = 'json',"
                + " 'properties.security.protocol' = 'SASL_SSL', 'properties.sasl.mechanism' = 'PLAIN',"
                + " 'properties.sasl.jaas.config' = '" + jaas + "',"
                + " 'properties.ssl.truststore.password' = 'hunter2')");
        // a temporary table: its options come from the table environment
        t.executeSql("CREATE TEMPORARY TABLE secured_in (a INT) WITH ('connector' = 'kafka', 'topic' = 'in',"
                + " 'properties.bootstrap.servers' = 'broker:9093', 'format' = 'json',"
                + " 'scan.startup.mode' = 'earliest-offset', 'properties.group.id' = 'g',"
                + " 'properties.sasl.jaas.config' = '" + jaas + "')");
        String insert = "INSERT INTO cat.`default`.secured SELECT a FROM secured_in";
        assertTrue(planOf(t, insert).contains("hunter2"), "the plan holds the secret");
        JsonNode lineage = lineage(t, insert);

        assertFalse(lineage.toString().contains("hunter2"), lineage.toString());
        assertFalse(lineage.toString().contains("sasl"), lineage.toString());
        JsonNode out = JSON.readTree("{\"connector\": \"kafka\", \"format\": \"json\","
                + " \"properties.bootstrap.servers\": \"broker:9093\", \"topic\": \"out\"}");
        JsonNode in = JSON.readTree("{\"connector\": \"kafka\", \"format\": \"json\","
                + " \"properties.bootstrap.servers\": \"broker:9093\", \"topic\": \"in\"}");
        assertEquals(out, lineage.get("sinks").get(0).get("options"));
        assertEquals(in, lineage.get("sinks").get(0).get("columns").get("x").get(0).get("options"));
        assertEquals(in, lineage.get("sources").get(0).get("options"));
    }

    /**
     * flink_jobs/iceberg_ingestion_job.py's statement set: the Kafka value decoded by {@code decode_order}, registered
     * as an instance; good orders to the catalog table, dead letters to Kafka. The whole account, options included.
     */
    @Test
    void icebergIngestionDecodesTheValuesFields() throws Exception {
        TableEnvironment t = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        DecodeOrderFunction decode =
                new DecodeOrderFunction(new DecodeSettings("http://registry:8085/apis/ccompat/v7", "u:pw", 3600, 3600));
        t.createTemporarySystemFunction("decode_order", decode);
        t.executeSql("CREATE TEMPORARY TABLE orders_raw (k STRING, v BYTES,"
                + " src_partition INT METADATA FROM 'partition' VIRTUAL,"
                + " src_offset BIGINT METADATA FROM 'offset' VIRTUAL,"
                + " src_timestamp TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL"
                + ") WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'kafka:9092',"
                + " 'properties.group.id' = 'iceberg-ingestion', 'properties.auto.offset.reset' = 'earliest',"
                + " 'properties.isolation.level' = 'read_committed', 'scan.startup.mode' = 'group-offsets',"
                + " 'key.format' = 'raw', 'key.fields' = 'k', 'value.format' = 'raw',"
                + " 'value.fields-include' = 'EXCEPT_KEY', 'properties.sasl.jaas.config' = 'secret')");
        t.executeSql("CREATE TEMPORARY TABLE orders_dlq (src_topic STRING, src_partition INT, src_offset BIGINT,"
                + " src_timestamp TIMESTAMP_LTZ(3), record_key STRING, raw_value BYTES, reason STRING) WITH ("
                + " 'connector' = 'kafka', 'topic' = 'orders-dlq-flink', 'properties.bootstrap.servers' = 'kafka:9092',"
                + " 'properties.transaction.timeout.ms' = '600000', 'sink.delivery-guarantee' = 'exactly-once',"
                + " 'sink.transactional-id-prefix' = 'iceberg-ingestion-dlq', 'format' = 'json')");
        // the job's Iceberg REST catalog, as a catalog of permanent tables
        t.executeSql("CREATE CATALOG lakehouse WITH ('type' = 'generic_in_memory')");
        t.executeSql("CREATE TABLE lakehouse.`default`.orders (order_id STRING, item STRING, price DECIMAL(10, 2),"
                + " supplier STRING, bid_time TIMESTAMP(6), currency STRING) WITH ('connector' = 'blackhole')");
        t.executeSql("CREATE TEMPORARY VIEW decoded AS"
                + " SELECT r.k, r.v, r.src_partition, r.src_offset, r.src_timestamp, d.* FROM orders_raw AS r,"
                + " LATERAL TABLE(decode_order(r.v)) AS d(order_id, supplier, item, price, bid_time, currency, error)");
        StatementSet set = t.createStatementSet();
        set.addInsertSql("INSERT INTO lakehouse.`default`.`orders`"
                + " (order_id, item, price, supplier, bid_time, currency)"
                + " SELECT order_id, item, price, supplier, CAST(bid_time AS TIMESTAMP(6)), currency"
                + " FROM decoded WHERE error IS NULL");
        set.addInsertSql("INSERT INTO orders_dlq"
                + " SELECT 'orders', src_partition, src_offset, src_timestamp, k, v, error"
                + " FROM decoded WHERE error IS NOT NULL");

        String account = PlanLineage.ofStatementSet(t, set, Map.of("decode_order", decode));

        String raw = "`default_catalog`.`default_database`.`orders_raw`";
        String rawOptions = "{\"connector\": \"kafka\", \"key.format\": \"raw\","
                + " \"properties.bootstrap.servers\": \"kafka:9092\", \"topic\": \"orders\","
                + " \"value.format\": \"raw\"}";
        String expected = "{\"sinks\": ["
                + "{\"table\": \"`lakehouse`.`default`.`orders`\", \"options\": {\"connector\": \"blackhole\"},"
                + " \"columns\": {"
                + "\"order_id\": [" + decoded(raw, rawOptions, "order_id", "DIRECT", "TRANSFORMATION", "decode_order")
                + "], \"item\": [" + decoded(raw, rawOptions, "item", "DIRECT", "TRANSFORMATION", "decode_order")
                + "], \"price\": [" + decoded(raw, rawOptions, "price", "DIRECT", "TRANSFORMATION", "decode_order")
                + "], \"supplier\": ["
                + decoded(raw, rawOptions, "supplier", "DIRECT", "TRANSFORMATION", "decode_order")
                + "], \"bid_time\": ["
                + decoded(raw, rawOptions, "bid_time", "DIRECT", "TRANSFORMATION", "CAST(decode_order)")
                + "], \"currency\": ["
                + decoded(raw, rawOptions, "currency", "DIRECT", "TRANSFORMATION", "decode_order") + "]},"
                + " \"indirect\": [" + decoded(raw, rawOptions, null, "INDIRECT", "FILTER", "IS NULL(decode_order)")
                + "]},"
                + "{\"table\": \"`default_catalog`.`default_database`.`orders_dlq`\", \"options\": {\"connector\":"
                + " \"kafka\", \"format\": \"json\", \"properties.bootstrap.servers\": \"kafka:9092\","
                + " \"topic\": \"orders-dlq-flink\"},"
                + " \"columns\": {"
                + "\"src_topic\": [], "
                + "\"src_partition\": [" + column(raw, rawOptions, "src_partition") + "], "
                + "\"src_offset\": [" + column(raw, rawOptions, "src_offset") + "], "
                + "\"src_timestamp\": [" + column(raw, rawOptions, "src_timestamp") + "], "
                + "\"record_key\": [" + column(raw, rawOptions, "k") + "], "
                + "\"raw_value\": [" + column(raw, rawOptions, "v") + "], "
                + "\"reason\": [" + decoded(raw, rawOptions, null, "DIRECT", "TRANSFORMATION", "decode_order") + "]},"
                + " \"indirect\": ["
                + decoded(raw, rawOptions, null, "INDIRECT", "FILTER", "IS NOT NULL(decode_order)") + "]}],"
                + " \"sources\": [{\"table\": \"" + raw + "\", \"options\": " + rawOptions + "}]}";
        assertEquals(JSON.readTree(expected), JSON.readTree(account));
        assertEquals(List.of("order_id", "item", "price", "supplier", "bid_time", "currency"),
                names(JSON.readTree(account).get("sinks").get(0).get("columns")), "the table's column order");
        assertFalse(account.contains("secret"));
        assertTrue(set.explain().contains("orders_dlq"), "the set keeps its INSERTs for the job to execute");
    }

    @Test
    void aConditionOnTheFunctionsFieldsFiltersOnTheDecodedFields() throws Exception {
        TableEnvironment t = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        DecodeOrderFunction decode = new DecodeOrderFunction(new DecodeSettings("http://registry:1/x", "", 60, 60));
        t.createTemporarySystemFunction("decode_order", decode);
        t.executeSql("CREATE TEMPORARY TABLE r (k STRING, v BYTES) WITH ('connector' = 'datagen')");
        t.executeSql("CREATE TEMPORARY TABLE o (a STRING, b STRING) WITH ('connector' = 'blackhole')");
        // other aliases than the function's own field names, which its field origins are given by
        String insert = "INSERT INTO o SELECT d.it, k FROM r,"
                + " LATERAL TABLE(decode_order(v)) AS d(oid, s, it, p, bt, cur, err) WHERE err IS NULL AND s <> 'x'";
        assertTrue(planOf(t, insert).contains("condition=[AND(IS NULL($6)"), "the filter is in the correlate");
        StatementSet set = t.createStatementSet();
        set.addInsertSql(insert);
        String r = "`default_catalog`.`default_database`.`r`";
        assertSink(JSON.readTree(PlanLineage.ofStatementSet(t, set, Map.of("decode_order", decode))),
                "{\"a\": [" + origin(r, "v", "item", "DIRECT", "TRANSFORMATION", "decode_order") + "], \"b\": ["
                        + origin(r, "k", "IDENTITY", null) + "]}",
                "[" + origin(r, "v", null, "INDIRECT", "FILTER", "IS NULL(decode_order)") + ", "
                        + origin(r, "v", "supplier", "INDIRECT", "FILTER", "<>(decode_order)") + "]");
    }

    static String column(String table, String options, String column) {
        return "{\"table\": \"" + table + "\", \"options\": " + options + ", \"column\": \"" + column
                + "\", \"field\": null, \"type\": \"DIRECT\", \"subtype\": \"IDENTITY\", \"description\": null}";
    }

    /** The value column {@code v}, or a field of it once decoded. */
    static String decoded(String table, String options, String field, String type, String subtype, String description) {
        return "{\"table\": \"" + table + "\", \"options\": " + options + ", \"column\": \"v\", \"field\": "
                + (field == null ? "null" : "\"" + field + "\"") + ", \"type\": \"" + type + "\", \"subtype\": \""
                + subtype + "\", \"description\": \"" + description + "\"}";
    }
}
