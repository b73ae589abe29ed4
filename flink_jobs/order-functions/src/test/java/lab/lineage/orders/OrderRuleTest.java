package lab.lineage.orders;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.time.Instant;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

class OrderRuleTest {
    static final long NOW = Instant.parse("2026-11-23T12:00:00Z").toEpochMilli();
    static final OrderRule RULE = new OrderRule(3600, 7 * 24 * 3600);
    /** How Spark casts a stored bid_time to text. */
    static final String BID = "2026-11-23 12:00:00";

    static String reason(String price, long bidMs) {
        return RULE.reason("o-1", "Alice", new BigDecimal(price), bidMs, NOW);
    }

    @ParameterizedTest
    @ValueSource(strings = {"0", "0.00", "12.3", "12.340", "99999999.99", " 7.50 "})
    void pricesThatFitDecimal10_2AreValid(String price) {
        assertNull(OrderRule.storedRowReason("o-1", "Alice", price, BID));
        assertNull(reason(price.strip(), NOW));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "1e309|price 1E+309 does not fit DECIMAL(10,2)",
        "123456789012345|price 123456789012345 does not fit DECIMAL(10,2)",
        "100000000.00|price 100000000.00 does not fit DECIMAL(10,2)",
        "12.345|price 12.345 does not fit DECIMAL(10,2)",
        "1e-999999999|price 1E-999999999 does not fit DECIMAL(10,2)",
        "-1.00|price -1.00 is negative",
        "Infinity|price Infinity is not a finite number",
        "-inf|price -Infinity is not a finite number",
        "NaN|price NaN is not a finite number",
        "abc|unparsable price 'abc'",
        "1e99999999999|unparsable price '1e99999999999'",
    })
    void eachInvalidPriceHasItsReason(String price, String why) {
        assertEquals(why, OrderRule.storedRowReason("o-1", "Alice", price, BID));
    }

    @Test
    void bidTimeMustLieInsideThePlausibilityWindow() {
        assertNull(reason("1.00", NOW + 3600_000));
        assertNull(reason("1.00", NOW - 7L * 24 * 3600_000));
        // one millisecond beyond either bound is outside
        assertEquals("bid_time 2026-11-23T13:00:00Z is more than 3600 s after processing time "
                + "(LINEAGE_LAB_ORDER_MAX_FUTURE_S)", reason("1.00", NOW + 3600_001));
        assertEquals("bid_time 2026-11-16T11:59:59Z is more than 604800 s before processing time "
                + "(LINEAGE_LAB_ORDER_MAX_PAST_S)", reason("1.00", NOW - 7L * 24 * 3600_000 - 1));
        assertEquals("bid_time 9999-12-31T23:59:59Z is more than 3600 s after processing time "
                + "(LINEAGE_LAB_ORDER_MAX_FUTURE_S)", reason("1.00", Instant.parse("9999-12-31T23:59:59Z")
                        .toEpochMilli()));
        assertEquals("bid_time 2000-01-01T00:00:00Z is more than 604800 s before processing time "
                + "(LINEAGE_LAB_ORDER_MAX_PAST_S)", reason("1.00", Instant.parse("2000-01-01T00:00:00Z")
                        .toEpochMilli()));
        // the largest timestamp Avro can carry still gets a reason, not an exception
        assertEquals("bid_time +292278994-08-17T07:12:55Z", reason("1.00", Long.MAX_VALUE).substring(0, 35));
    }

    @Test
    void orderIdAndSupplierMustNotBeEmpty() {
        assertEquals("order_id is empty", OrderRule.storedRowReason(" ", "Alice", "1.00", BID));
        assertEquals("supplier is empty", OrderRule.storedRowReason("o-1", "", "1.00", BID));
        assertEquals("supplier is empty", OrderRule.storedRowReason("o-1", null, "1.00", BID));
        assertEquals("price is missing", OrderRule.storedRowReason("o-1", "Alice", null, BID));
        assertEquals("bid_time missing or null", OrderRule.storedRowReason("o-1", "Alice", "1.00", null));
        assertEquals("", OrderRule.storedRowRejection("o-1", "Alice", "1.00", BID), "Spark's valid row");
        assertEquals("supplier is empty", OrderRule.storedRowRejection("o-1", " ", "1.00", BID));
    }

    @Test
    void aNegativeWindowIsAConfigurationError() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new OrderRule(-1, 0));
        assertEquals(true, e.getMessage().contains("must not be negative"));
        assertThrows(IllegalArgumentException.class, () -> new OrderRule(0, -1));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {"12.3|12.30", "12.340|12.34", "0E-999999999|0.00", "0E+999999999|0.00",
        "1.000000000000000000000000000000|1.00", "5E+2|500.00"})
    void aValidPriceIsStoredWithTwoDecimalsWhateverItsScale(String price, String stored) {
        assertNull(OrderRule.storedRowReason("o-1", "Alice", price, BID));
        assertEquals(stored, OrderRule.asStored(new BigDecimal(price)).toPlainString());
    }
}
