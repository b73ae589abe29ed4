package lab.lineage.orders;

import java.io.Serializable;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * The one rule for a valid order, for every consumer of {@code orders}: both Flink jobs apply all of it when they
 * decode a record, the Spark job counts the Iceberg rows that break its clock-free part ({@link #storedRowReason}).
 *
 * <p>An order is valid when order_id and supplier are non-empty, the price is a finite decimal that fits the Iceberg
 * column (DECIMAL(10,2), not negative) and bid_time lies inside a window of plausibility around processing time. An
 * order outside that window would move (or never reach) supplier-stats' event-time clock, so it is dead-lettered.
 */
public final class OrderRule implements Serializable {
    private static final long serialVersionUID = 1L;

    public static final int PRICE_PRECISION = 10;
    public static final int PRICE_SCALE = 2;
    public static final BigDecimal MAX_PRICE = new BigDecimal("99999999.99");
    public static final long DEFAULT_MAX_FUTURE_S = 3600;
    /** The retention of {@code orders}: an older order cannot be a replay of the topic. */
    public static final long DEFAULT_MAX_PAST_S = 7L * 24 * 3600;

    private static final DateTimeFormatter UTC_SECONDS =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss'Z'").withZone(ZoneOffset.UTC);

    private final long maxFutureS;
    private final long maxPastS;

    public OrderRule(long maxFutureS, long maxPastS) {
        if (maxFutureS < 0 || maxPastS < 0) {
            throw new IllegalArgumentException(
                    "the plausibility window must not be negative (max_future_s=" + maxFutureS + ", max_past_s="
                            + maxPastS + "): set LINEAGE_LAB_ORDER_MAX_FUTURE_S / LINEAGE_LAB_ORDER_MAX_PAST_S to "
                            + "zero or more seconds");
        }
        this.maxFutureS = maxFutureS;
        this.maxPastS = maxPastS;
    }

    public OrderRule() {
        this(DEFAULT_MAX_FUTURE_S, DEFAULT_MAX_PAST_S);
    }

    public long maxFutureS() {
        return maxFutureS;
    }

    public long maxPastS() {
        return maxPastS;
    }

    /** The price as a decimal, or null when the text is no number at all (the caller names it unparsable). */
    public static BigDecimal parsePrice(String text) {
        try {
            return new BigDecimal(text.strip());
        } catch (NumberFormatException | ArithmeticException e) {
            return null;
        }
    }

    /** Why a price text that {@link #parsePrice} refused is still a number, only not a finite one; else null. */
    public static String nonFiniteReason(String text) {
        String t = text.strip().toLowerCase(java.util.Locale.ROOT);
        String sign = t.startsWith("-") ? "-" : "";
        String bare = t.startsWith("-") || t.startsWith("+") ? t.substring(1) : t;
        String shown;
        if (bare.equals("inf") || bare.equals("infinity")) {
            shown = sign + "Infinity";
        } else if (bare.equals("nan") || bare.equals("snan")) {
            shown = "NaN";
        } else {
            return null;
        }
        return "price " + shown + " is not a finite number";
    }

    /** Why the order is not valid, or null. Times are epoch milliseconds (UTC). */
    public String reason(String orderId, String supplier, BigDecimal price, long bidTimeMs, long nowMs) {
        String stored = clockFreeReason(orderId, supplier, price);
        if (stored != null) {
            return stored;
        }
        if (bidTimeMs > nowMs + maxFutureS * 1000) {
            return "bid_time " + utcText(bidTimeMs) + " is more than " + maxFutureS
                    + " s after processing time (LINEAGE_LAB_ORDER_MAX_FUTURE_S)";
        }
        if (bidTimeMs < nowMs - maxPastS * 1000) {
            return "bid_time " + utcText(bidTimeMs) + " is more than " + maxPastS
                    + " s before processing time (LINEAGE_LAB_ORDER_MAX_PAST_S)";
        }
        return null;
    }

    /**
     * The clock-free part of the rule, for a row already stored (Spark's rejected-order count calls it through
     * {@code java_method}, every column as text): null when valid, else the reason.
     */
    public static String storedRowReason(String orderId, String supplier, String price, String bidTime) {
        String ids = clockFreeReason(orderId, supplier, BigDecimal.ZERO);
        if (ids != null) {
            return ids;
        }
        if (price == null) {
            return "price is missing";
        }
        if (bidTime == null || bidTime.isBlank()) {
            return "bid_time missing or null";
        }
        BigDecimal parsed = parsePrice(price);
        if (parsed == null) {
            String nonFinite = nonFiniteReason(price);
            return nonFinite != null ? nonFinite : "unparsable price '" + price + "'";
        }
        return clockFreeReason(orderId, supplier, parsed);
    }

    /**
     * {@link #storedRowReason} for Spark's {@code java_method}: the empty string for a valid row (Spark turns a null
     * result into the text "null").
     */
    public static String storedRowRejection(String orderId, String supplier, String price, String bidTime) {
        String reason = storedRowReason(orderId, supplier, price, bidTime);
        return reason == null ? "" : reason;
    }

    static String clockFreeReason(String orderId, String supplier, BigDecimal price) {
        if (orderId == null || orderId.isBlank()) {
            return "order_id is empty";
        }
        if (supplier == null || supplier.isBlank()) {
            return "supplier is empty";
        }
        if (price == null) {
            return "price is missing";
        }
        if (price.signum() < 0) {
            return "price " + price + " is negative";
        }
        if (price.compareTo(MAX_PRICE) > 0 || !wholeCents(price)) {
            return "price " + price + " does not fit DECIMAL(" + PRICE_PRECISION + "," + PRICE_SCALE + ")";
        }
        return null;
    }

    /**
     * Whether the price has no digit beyond the cent, without ever scaling by a power of ten taken from the data
     * (a hostile exponent such as 1e-999999999 would make setScale run out of range or time).
     */
    static boolean wholeCents(BigDecimal price) {
        int extra = price.scale() - PRICE_SCALE;
        if (extra <= 0 || price.signum() == 0) {
            return true;
        }
        if (extra >= price.precision()) {
            return false;  // a non-zero value cannot end in more zeros than it has digits
        }
        return price.unscaledValue().mod(BigInteger.TEN.pow(extra)).signum() == 0;
    }

    /** A valid price as the table stores it, DECIMAL(10,2) (cheap for any scale the rule let through). */
    public static BigDecimal asStored(BigDecimal validPrice) {
        if (validPrice.signum() == 0) {
            return BigDecimal.ZERO.setScale(PRICE_SCALE);
        }
        int extra = validPrice.scale() - PRICE_SCALE;
        if (extra <= 0) {
            return validPrice.setScale(PRICE_SCALE, RoundingMode.UNNECESSARY);
        }
        return new BigDecimal(validPrice.unscaledValue().divide(BigInteger.TEN.pow(extra)), PRICE_SCALE);
    }

    /** The reference's time format, yyyy-MM-ddTHH:mm:ssZ in UTC (window bounds and reasons). */
    public static String utcText(long epochMs) {
        return UTC_SECONDS.format(Instant.ofEpochMilli(epochMs));
    }
}
