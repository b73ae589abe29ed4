package lab.lineage.orders;

import java.io.IOException;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.LongSupplier;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;

/**
 * Decodes one {@code orders} value (Confluent wire format: magic byte 0, schema id, Avro binary) into a valid order or
 * the reason it is not one. Never throws for bad data; throws IOException only when the registry cannot answer.
 *
 * <p>A record is bad when it is not Confluent wire format, names an unknown schema id, does not decode, lacks a
 * string field, has an unparsable price or a missing bid_time, or breaks the {@link OrderRule}. Fields the source
 * added later ({@link #OPTIONAL_STRINGS}) are read when the writer schema has them; any other new field is ignored.
 */
public final class OrderDecoder {
    public static final List<String> REQUIRED_STRINGS = List.of("order_id", "supplier", "item", "price");
    /** The optional columns of the orders topic (the identity module declares them; a test holds the two equal). */
    public static final List<String> OPTIONAL_STRINGS = List.of("currency");

    private final SchemaSource schemas;
    private final OrderRule rule;
    private final LongSupplier clockMs;
    private BinaryDecoder reuse;
    /** One reader per writer schema: building a reader (and its resolver) per record cost more than decoding. */
    private final Map<Schema, GenericDatumReader<Object>> readers = new IdentityHashMap<>();

    public OrderDecoder(SchemaSource schemas, OrderRule rule, LongSupplier clockMs) {
        this.schemas = schemas;
        this.rule = rule;
        this.clockMs = clockMs;
    }

    public OrderDecoder(SchemaSource schemas, OrderRule rule) {
        this(schemas, rule, System::currentTimeMillis);
    }

    public DecodedOrder decode(byte[] value) throws IOException {
        if (value == null) {
            return DecodedOrder.bad(null, "null value (tombstone)");
        }
        if (value.length < 5 || value[0] != 0) {
            String first = value.length == 0 ? "-" : String.format("%02x", value[0] & 0xff);
            return DecodedOrder.bad(value, "not Confluent wire format (length " + value.length + ", first byte "
                    + first + ")");
        }
        int schemaId = ByteBuffer.wrap(value, 1, 4).getInt();
        String idText = Integer.toUnsignedString(schemaId);
        Optional<Schema> schema = schemas.get(schemaId);
        if (schema.isEmpty()) {
            return DecodedOrder.bad(value, "unknown schema id " + idText);
        }
        Object decoded;
        long trailing;
        try {
            reuse = DecoderFactory.get().binaryDecoder(value, 5, value.length - 5, reuse);
            decoded = readers.computeIfAbsent(schema.get(), GenericDatumReader::new).read(null, reuse);
            trailing = reuse.inputStream().available();
        } catch (Exception | OutOfMemoryError e) {
            // truncated or corrupt payloads; a corrupt length may ask for more memory than there is
            reuse = null;
            return DecodedOrder.bad(value, "avro decode failed (schema id " + idText + "): "
                    + e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        if (trailing != 0) {
            return DecodedOrder.bad(value, "avro decode left " + trailing + " trailing bytes (schema id " + idText
                    + ")");
        }
        if (!(decoded instanceof GenericRecord)) {
            return DecodedOrder.bad(value, "value is not a record (schema id " + idText + ")");
        }
        GenericRecord rec = (GenericRecord) decoded;
        for (String name : REQUIRED_STRINGS) {
            Object field = field(rec, name);
            if (!(field instanceof CharSequence)) {
                return DecodedOrder.bad(value, name + " missing or not a string: " + field);
            }
        }
        String priceText = field(rec, "price").toString();
        BigDecimal price = OrderRule.parsePrice(priceText);
        if (price == null) {
            String nonFinite = OrderRule.nonFiniteReason(priceText);
            return DecodedOrder.bad(value, nonFinite != null ? nonFinite : "unparsable price '" + priceText + "'");
        }
        Object bid = field(rec, "bid_time");
        if (!(bid instanceof Long || bid instanceof Integer)) {
            return DecodedOrder.bad(value, "bid_time missing or null: " + bid);
        }
        long bidMs = toMillis(((Number) bid).longValue(), rec.getSchema().getField("bid_time").schema());
        for (String name : OPTIONAL_STRINGS) {
            Object field = field(rec, name);
            if (field != null && !(field instanceof CharSequence)) {
                return DecodedOrder.bad(value, name + " is not a string: " + field);
            }
        }
        DecodedOrder order = new DecodedOrder();
        order.raw = value;
        order.orderId = field(rec, "order_id").toString();
        order.supplier = field(rec, "supplier").toString();
        order.item = field(rec, "item").toString();
        order.price = price;  // made DECIMAL(10,2) once the rule accepted it
        order.bidTimeMs = bidMs;
        Object currency = field(rec, "currency");
        order.currency = currency == null ? null : currency.toString();
        order.reason = rule.reason(order.orderId, order.supplier, price, bidMs, clockMs.getAsLong());
        if (order.reason != null) {
            return DecodedOrder.bad(value, order.reason);
        }
        order.price = OrderRule.asStored(price);
        return order;
    }

    private static Object field(GenericRecord rec, String name) {
        return rec.hasField(name) ? rec.get(name) : null;
    }

    /** bid_time in milliseconds: the writer's timestamp-micros (or -nanos) scaled down, anything else as millis. */
    private static long toMillis(long raw, Schema fieldSchema) {
        Schema branch = fieldSchema;
        if (fieldSchema.getType() == Schema.Type.UNION) {
            branch = fieldSchema.getTypes().stream().filter(s -> s.getType() != Schema.Type.NULL).findFirst()
                    .orElse(fieldSchema);
        }
        LogicalType logical = branch.getLogicalType();
        if (logical instanceof LogicalTypes.TimestampMicros || logical instanceof LogicalTypes.LocalTimestampMicros) {
            return Math.floorDiv(raw, 1000L);
        }
        if (logical instanceof LogicalTypes.TimestampNanos || logical instanceof LogicalTypes.LocalTimestampNanos) {
            return Math.floorDiv(raw, 1_000_000L);
        }
        return raw;
    }
}
