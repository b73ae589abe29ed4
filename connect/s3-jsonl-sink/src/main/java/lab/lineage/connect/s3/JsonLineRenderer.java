package lab.lineage.connect.s3;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.Collection;
import java.util.Date;
import java.util.Map;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;

import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;

/**
 * Renders a Connect record value (with or without a schema) as one line of compact JSON.
 *
 * <p>Mapping:
 * <ul>
 *   <li>{@link Struct} → object, fields in schema order; {@link Map} → object (keys must be
 *       strings, numbers or booleans and are written as strings); arrays/collections → array.</li>
 *   <li>{@code Timestamp} logical type (Avro {@code timestamp-millis}) and any {@link Date} without a
 *       more specific logical type → ISO-8601 UTC string with millisecond precision,
 *       e.g. {@code "2024-05-01T12:34:56.789Z"}.</li>
 *   <li>{@code Date} logical type → {@code "yyyy-MM-dd"}; {@code Time} → {@code "HH:mm:ss.SSS"}.</li>
 *   <li>{@code Decimal} logical type / {@link BigDecimal} → string in plain notation
 *       (no exponent, scale kept), so no precision is lost to JSON doubles.</li>
 *   <li>bytes → base64 string; NaN/±Infinity floats → the strings "NaN", "Infinity", "-Infinity".</li>
 * </ul>
 * Anything else (e.g. an arbitrary Java object produced by an unusual converter) is rejected with a
 * {@link DataException}, which the task routes to Connect's error handling.
 *
 * <p>Instances are not thread-safe (they reuse a buffer); a task uses one from its own thread.
 */
public final class JsonLineRenderer {

    static final String LOGICAL_TIMESTAMP = org.apache.kafka.connect.data.Timestamp.LOGICAL_NAME;
    static final String LOGICAL_DATE = org.apache.kafka.connect.data.Date.LOGICAL_NAME;
    static final String LOGICAL_TIME = org.apache.kafka.connect.data.Time.LOGICAL_NAME;
    static final String LOGICAL_DECIMAL = org.apache.kafka.connect.data.Decimal.LOGICAL_NAME;

    static final DateTimeFormatter ISO_MILLIS_UTC =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);
    static final DateTimeFormatter ISO_DATE_UTC = DateTimeFormatter.ISO_LOCAL_DATE.withZone(ZoneOffset.UTC);
    static final DateTimeFormatter ISO_TIME_UTC =
            DateTimeFormatter.ofPattern("HH:mm:ss.SSS").withZone(ZoneOffset.UTC);

    private static final int MAX_DEPTH = 200;

    private final JsonFactory factory = new JsonFactory();
    private final ByteArrayOutputStream buffer = new ByteArrayOutputStream(512);

    /**
     * Renders {@code value} as a single line of UTF-8 JSON, without the trailing newline.
     *
     * @throws DataException if the value cannot be represented as JSON
     */
    public byte[] render(Schema schema, Object value) {
        buffer.reset();
        try (JsonGenerator gen = factory.createGenerator(buffer, JsonEncoding.UTF8)) {
            write(gen, schema, value, 0);
        } catch (IOException e) {
            // ByteArrayOutputStream never throws; Jackson reports its own state errors as IOException.
            throw new DataException("Failed to render record value as JSON: " + e.getMessage(), e);
        }
        return buffer.toByteArray();
    }

    private void write(JsonGenerator gen, Schema schema, Object value, int depth) throws IOException {
        if (depth > MAX_DEPTH) {
            throw new DataException("Value nested deeper than " + MAX_DEPTH + " levels");
        }
        if (value == null) {
            gen.writeNull();
            return;
        }
        String logical = schema == null ? null : schema.name();
        if (logical != null) {
            switch (logical) {
                case LOGICAL_TIMESTAMP:
                    gen.writeString(formatTimestamp(asDate(value, logical)));
                    return;
                case LOGICAL_DATE:
                    gen.writeString(ISO_DATE_UTC.format(asDate(value, logical).toInstant()));
                    return;
                case LOGICAL_TIME:
                    gen.writeString(ISO_TIME_UTC.format(asDate(value, logical).toInstant()));
                    return;
                case LOGICAL_DECIMAL:
                    if (!(value instanceof BigDecimal)) {
                        throw new DataException("Decimal field holds " + value.getClass().getName());
                    }
                    gen.writeString(((BigDecimal) value).toPlainString());
                    return;
                default:
                    // Unknown logical/named type: render by physical type below.
            }
        }

        if (value instanceof Struct) {
            writeStruct(gen, (Struct) value, depth);
        } else if (value instanceof Map) {
            writeMap(gen, schema, (Map<?, ?>) value, depth);
        } else if (value instanceof Collection) {
            Schema elementSchema = schema != null && schema.type() == Schema.Type.ARRAY ? schema.valueSchema() : null;
            gen.writeStartArray();
            for (Object element : (Collection<?>) value) {
                write(gen, elementSchema, element, depth + 1);
            }
            gen.writeEndArray();
        } else if (value instanceof String) {
            gen.writeString((String) value);
        } else if (value instanceof Boolean) {
            gen.writeBoolean((Boolean) value);
        } else if (value instanceof Byte || value instanceof Short || value instanceof Integer) {
            gen.writeNumber(((Number) value).intValue());
        } else if (value instanceof Long) {
            gen.writeNumber((Long) value);
        } else if (value instanceof Float) {
            float f = (Float) value;
            if (Float.isFinite(f)) {
                gen.writeNumber(f);
            } else {
                gen.writeString(Float.toString(f));
            }
        } else if (value instanceof Double) {
            double d = (Double) value;
            if (Double.isFinite(d)) {
                gen.writeNumber(d);
            } else {
                gen.writeString(Double.toString(d));
            }
        } else if (value instanceof BigDecimal) {
            gen.writeString(((BigDecimal) value).toPlainString());
        } else if (value instanceof BigInteger) {
            gen.writeNumber((BigInteger) value);
        } else if (value instanceof Date) {
            gen.writeString(formatTimestamp((Date) value));
        } else if (value instanceof byte[]) {
            gen.writeString(Base64.getEncoder().encodeToString((byte[]) value));
        } else if (value instanceof ByteBuffer) {
            ByteBuffer bb = ((ByteBuffer) value).duplicate();
            byte[] bytes = new byte[bb.remaining()];
            bb.get(bytes);
            gen.writeString(Base64.getEncoder().encodeToString(bytes));
        } else {
            throw new DataException("Cannot render value of type " + value.getClass().getName() + " as JSON");
        }
    }

    private void writeStruct(JsonGenerator gen, Struct struct, int depth) throws IOException {
        gen.writeStartObject();
        for (Field field : struct.schema().fields()) {
            gen.writeFieldName(field.name());
            // getWithoutDefault: render what the record holds; explicit nulls stay null.
            write(gen, field.schema(), struct.getWithoutDefault(field.name()), depth + 1);
        }
        gen.writeEndObject();
    }

    private void writeMap(JsonGenerator gen, Schema schema, Map<?, ?> map, int depth) throws IOException {
        Schema valueSchema = schema != null && schema.type() == Schema.Type.MAP ? schema.valueSchema() : null;
        gen.writeStartObject();
        for (Map.Entry<?, ?> e : map.entrySet()) {
            gen.writeFieldName(mapKey(e.getKey()));
            write(gen, valueSchema, e.getValue(), depth + 1);
        }
        gen.writeEndObject();
    }

    private static String mapKey(Object key) {
        if (key instanceof String) {
            return (String) key;
        }
        if (key instanceof Number || key instanceof Boolean) {
            return key.toString();
        }
        throw new DataException("Map key of type " + (key == null ? "null" : key.getClass().getName())
                + " cannot be rendered as a JSON object key (only strings, numbers and booleans)");
    }

    private static Date asDate(Object value, String logical) {
        if (value instanceof Date) {
            return (Date) value;
        }
        throw new DataException(logical + " value holds " + value.getClass().getName() + ", expected java.util.Date");
    }

    static String formatTimestamp(Date d) {
        return ISO_MILLIS_UTC.format(Instant.ofEpochMilli(d.getTime()));
    }

}
