package lab.lineage.connect.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.json.JsonConverter;
import org.junit.jupiter.api.Test;

class JsonLineRendererTest {

    private final JsonLineRenderer renderer = new JsonLineRenderer();

    private String render(Schema schema, Object value) {
        return new String(renderer.render(schema, value), StandardCharsets.UTF_8);
    }

    private static final Schema ITEM = SchemaBuilder.struct().name("Item")
            .field("sku", Schema.STRING_SCHEMA)
            .field("qty", Schema.INT32_SCHEMA)
            .build();

    private static final Schema ORDER = SchemaBuilder.struct().name("lab.Order")
            .field("order_id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA)
            .field("amount", Decimal.schema(2))
            .field("created_at", Timestamp.SCHEMA)
            .field("ship_date", org.apache.kafka.connect.data.Date.SCHEMA)
            .field("ship_time", Time.SCHEMA)
            .field("paid", Schema.BOOLEAN_SCHEMA)
            .field("score", Schema.FLOAT64_SCHEMA)
            .field("note", Schema.OPTIONAL_STRING_SCHEMA)
            .field("items", SchemaBuilder.array(ITEM).build())
            .field("tags", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.STRING_SCHEMA).build())
            .field("raw", Schema.BYTES_SCHEMA)
            .build();

    @Test
    void structWithLogicalTypes() {
        long millis = 1_714_566_896_789L; // 2024-05-01T12:34:56.789Z
        Map<String, String> tags = new LinkedHashMap<>();
        tags.put("channel", "web");
        tags.put("q\"uote", "line\nbreak");
        Struct order = new Struct(ORDER)
                .put("order_id", 42L)
                .put("customer", "zoë")
                .put("amount", new BigDecimal("1234.50"))
                .put("created_at", new Date(millis))
                .put("ship_date", new Date(19_844L * 86_400_000L)) // 2024-05-01
                .put("ship_time", new Date(45_296_007L))          // 12:34:56.007
                .put("paid", true)
                .put("score", 0.25)
                .put("note", null)
                .put("items", List.of(new Struct(ITEM).put("sku", "A-1").put("qty", 2)))
                .put("tags", tags)
                .put("raw", new byte[] {1, 2, 3});
        assertEquals("{\"order_id\":42,\"customer\":\"zoë\",\"amount\":\"1234.50\","
                        + "\"created_at\":\"2024-05-01T12:34:56.789Z\",\"ship_date\":\"2024-05-01\","
                        + "\"ship_time\":\"12:34:56.007\",\"paid\":true,\"score\":0.25,\"note\":null,"
                        + "\"items\":[{\"sku\":\"A-1\",\"qty\":2}],"
                        + "\"tags\":{\"channel\":\"web\",\"q\\\"uote\":\"line\\nbreak\"},\"raw\":\"AQID\"}",
                render(ORDER, order));
    }

    @Test
    void timestampAlwaysHasMillisAndUtc() {
        assertEquals("\"1970-01-01T00:00:00.000Z\"", render(Timestamp.SCHEMA, new Date(0)));
        assertEquals("\"1969-12-31T23:59:59.999Z\"", render(Timestamp.SCHEMA, new Date(-1)));
    }

    @Test
    void decimalsArePlainStrings() {
        assertEquals("\"0.00000001\"", render(Decimal.schema(8), new BigDecimal("1E-8")));
        assertEquals("\"12300\"", render(Decimal.schema(0), new BigDecimal("1.23E+4")));
        assertEquals("\"-7.10\"", render(null, new BigDecimal("-7.10")));
    }

    @Test
    void schemalessValuesFromJsonConverter() {
        Map<String, Object> value = new LinkedHashMap<>();
        value.put("order_id", 7L);
        value.put("lines", Arrays.asList(1, null, "x"));
        value.put("nested", Map.of("k", false));
        value.put("when", new Date(1_000));
        assertEquals("{\"order_id\":7,\"lines\":[1,null,\"x\"],\"nested\":{\"k\":false},"
                + "\"when\":\"1970-01-01T00:00:01.000Z\"}", render(null, value));
    }

    @Test
    void primitivesAndSpecialFloats() {
        assertEquals("\"plain string\"", render(Schema.STRING_SCHEMA, "plain string"));
        assertEquals("3", render(null, (short) 3));
        assertEquals("\"NaN\"", render(null, Double.NaN));
        assertEquals("\"-Infinity\"", render(null, Float.NEGATIVE_INFINITY));
        assertEquals("\"AQI=\"", render(null, ByteBuffer.wrap(new byte[] {1, 2})));
    }

    @Test
    void numericMapKeysBecomeStrings() {
        Schema s = SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).build();
        Map<Integer, String> m = new LinkedHashMap<>();
        m.put(1, "a");
        assertEquals("{\"1\":\"a\"}", render(s, m));
    }

    @Test
    void unrenderableValuesThrowDataException() {
        assertThrows(DataException.class, () -> render(null, new Object()));
        Map<Object, Object> structKey = Map.of(new Struct(ITEM).put("sku", "a").put("qty", 1), "v");
        assertThrows(DataException.class, () -> render(null, structKey));
        assertThrows(DataException.class, () -> render(Timestamp.SCHEMA, "not a date"));
    }

    @Test
    void rendererIsReusableAfterFailure() {
        assertThrows(DataException.class, () -> render(null, List.of(1, new Object())));
        assertEquals("[1,2]", render(null, List.of(1, 2)));
    }

    @Test
    void envelopeFromJsonConverterWithSchemasEnabled() {
        // What the worker hands us for value.converter=JsonConverter, schemas.enable=true.
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true", "decimal.format", "NUMERIC"), false);
        String envelope = "{\"schema\":{\"type\":\"struct\",\"name\":\"order\",\"fields\":["
                + "{\"field\":\"order_id\",\"type\":\"int64\"},"
                + "{\"field\":\"created_at\",\"type\":\"int64\",\"name\":\"org.apache.kafka.connect.data.Timestamp\","
                + "\"version\":1},"
                + "{\"field\":\"amount\",\"type\":\"bytes\",\"name\":\"org.apache.kafka.connect.data.Decimal\","
                + "\"parameters\":{\"scale\":\"2\"}}]},"
                + "\"payload\":{\"order_id\":1,\"created_at\":1714566896789,\"amount\":19.90}}";
        SchemaAndValue sv = converter.toConnectData("orders", envelope.getBytes(StandardCharsets.UTF_8));
        converter.close();
        assertEquals("{\"order_id\":1,\"created_at\":\"2024-05-01T12:34:56.789Z\",\"amount\":\"19.90\"}",
                render(sv.schema(), sv.value()));
    }
}
