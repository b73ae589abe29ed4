package lab.lineage.orders;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.junit.jupiter.api.Test;

class OrderDecoderTest {
    static final String FIELDS = "{\"name\":\"supplier\",\"type\":\"string\"},{\"name\":\"item\",\"type\":\"string\"},"
            + "{\"name\":\"price\",\"type\":\"string\"},%s,{\"name\":\"order_id\",\"type\":\"string\"}%s";
    static final String MILLIS = "{\"name\":\"bid_time\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}}";
    static final Schema ORDER = schema(MILLIS, "");
    static final Schema NULLABLE_BID = schema("{\"name\":\"bid_time\",\"type\":[\"null\",\"long\"]}", "");
    /** The version Debezium registers after ADD COLUMN currency, and one more column nobody declared. */
    static final Schema WITH_CURRENCY = schema(MILLIS, ",{\"name\":\"currency\",\"type\":[\"null\",\"string\"],"
            + "\"default\":null},{\"name\":\"coupon\",\"type\":[\"null\",\"string\"],\"default\":null}");
    static final Schema NUMERIC_CURRENCY = schema(MILLIS, ",{\"name\":\"currency\",\"type\":\"int\"}");
    static final Schema MICROS = schema(
            "{\"name\":\"bid_time\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}}", "");
    static final Map<Integer, Schema> BY_ID =
            Map.of(7, ORDER, 8, NULLABLE_BID, 9, WITH_CURRENCY, 10, NUMERIC_CURRENCY, 11, MICROS);
    static final long NOW = Instant.parse("2025-05-01T12:00:30Z").toEpochMilli();
    static final long BID = Instant.parse("2025-05-01T12:00:01.500Z").toEpochMilli();

    final OrderDecoder decoder =
            new OrderDecoder(id -> Optional.ofNullable(BY_ID.get(id)), new OrderRule(3600, 7 * 24 * 3600), () -> NOW);

    static Schema schema(String bidTime, String more) {
        return new Schema.Parser().parse("{\"type\":\"record\",\"name\":\"Order\",\"fields\":["
                + String.format(FIELDS, bidTime, more) + "]}");
    }

    static GenericRecord good(Schema schema) {
        GenericRecord r = new GenericData.Record(schema);
        r.put("supplier", "Alice");
        r.put("item", "Lamp");
        r.put("price", "12.3");
        r.put("bid_time", BID);
        r.put("order_id", "o-1");
        return r;
    }

    static byte[] wire(GenericRecord record, int schemaId) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(0);
        out.write(ByteBuffer.allocate(4).putInt(schemaId).array());
        BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
        new GenericDatumWriter<GenericRecord>(record.getSchema()).write(record, encoder);
        encoder.flush();
        return out.toByteArray();
    }

    String reasonOf(byte[] value) throws IOException {
        DecodedOrder d = decoder.decode(value);
        assertTrue(d.raw == value, "the record is kept whole");
        return d.reason;
    }

    @Test
    void aGoodOrderKeepsItsExactPriceAndUtcBidTime() throws IOException {
        byte[] value = wire(good(ORDER), 7);
        DecodedOrder order = decoder.decode(value);
        assertNull(order.reason);
        assertEquals("o-1", order.orderId);
        assertEquals("Alice", order.supplier);
        assertEquals("Lamp", order.item);
        assertEquals(new BigDecimal("12.30"), order.price);
        assertEquals(BID, order.bidTimeMs);
        assertNull(order.currency);
        assertTrue(Arrays.equals(value, order.raw));
    }

    @Test
    void currencyIsReadWhenTheWriterHasItAndUnknownFieldsAreIgnored() throws IOException {
        GenericRecord newer = good(WITH_CURRENCY);
        newer.put("currency", "EUR");
        newer.put("coupon", "X");
        assertEquals("EUR", decoder.decode(wire(newer, 9)).currency);
        assertNull(decoder.decode(wire(good(WITH_CURRENCY), 9)).currency);
    }

    @Test
    void timestampMicrosAreScaledToMillis() throws IOException {
        GenericRecord micros = good(MICROS);
        micros.put("bid_time", BID * 1000 + 999);
        assertEquals(BID, decoder.decode(wire(micros, 11)).bidTimeMs);
    }

    @Test
    void eachBadRecordNamesWhatIsWrong() throws IOException {
        byte[] goodWire = wire(good(ORDER), 7);
        GenericRecord abc = good(ORDER);
        abc.put("price", "abc");
        GenericRecord nan = good(ORDER);
        nan.put("price", "NaN");
        GenericRecord noBid = good(NULLABLE_BID);
        noBid.put("bid_time", null);
        GenericRecord numeric = good(NUMERIC_CURRENCY);
        numeric.put("currency", 978);
        GenericRecord future = good(ORDER);
        future.put("bid_time", Instant.parse("9999-12-31T23:59:59Z").toEpochMilli());
        GenericRecord emptyId = good(ORDER);
        emptyId.put("order_id", "  ");

        assertNull(decoder.decode(null).raw);
        assertEquals("null value (tombstone)", decoder.decode(null).reason);
        assertEquals("not Confluent wire format (length 19, first byte 64)",
                reasonOf("definitely not avro".getBytes()));
        assertEquals("not Confluent wire format (length 2, first byte 00)", reasonOf(new byte[] {0, 0}));
        assertEquals("not Confluent wire format (length 0, first byte -)", reasonOf(new byte[0]));
        assertEquals("unknown schema id 99", reasonOf(new byte[] {0, 0, 0, 0, 99, 'a', 'b', 'c'}));
        assertEquals("unknown schema id 4294967295", reasonOf(new byte[] {0, -1, -1, -1, -1, 'a'}));
        assertTrue(reasonOf(Arrays.copyOf(goodWire, goodWire.length - 3)).startsWith(
                "avro decode failed (schema id 7)"));
        byte[] trailing = Arrays.copyOf(goodWire, goodWire.length + 2);
        assertEquals("avro decode left 2 trailing bytes (schema id 7)", reasonOf(trailing));
        assertEquals("unparsable price 'abc'", reasonOf(wire(abc, 7)));
        assertEquals("price NaN is not a finite number", reasonOf(wire(nan, 7)));
        assertTrue(reasonOf(wire(noBid, 8)).startsWith("bid_time missing or null"));
        assertEquals("currency is not a string: 978", reasonOf(wire(numeric, 10)));
        assertTrue(reasonOf(wire(future, 7)).startsWith("bid_time 9999-12-31T23:59:59Z is more than 3600 s"));
        assertEquals("order_id is empty", reasonOf(wire(emptyId, 7)));
    }

    @Test
    void aCorruptLengthThatAsksForGigabytesIsAReasonNotACrash() throws IOException {
        // supplier's string length as a zig-zag varint of 2,000,000,000, then nothing
        byte[] hostile = {0, 0, 0, 0, 7, (byte) 0x80, (byte) 0xd0, (byte) 0xac, (byte) 0xf3, 0x0e};
        assertTrue(reasonOf(hostile).startsWith("avro decode failed (schema id 7)"), reasonOf(hostile));
    }

    @Test
    void aReasonIsCutButTheRecordStaysWhole() throws IOException {
        GenericRecord longPrice = good(ORDER);
        String junk = "x".repeat(5000);
        longPrice.put("price", junk);
        byte[] value = wire(longPrice, 7);
        DecodedOrder d = decoder.decode(value);
        assertEquals(DecodedOrder.MAX_REASON, d.reason.length());
        assertTrue(Arrays.equals(value, d.raw));
    }
}
