package lab.lineage.orders;

import java.math.BigDecimal;
import java.util.Arrays;
import java.util.Objects;

/**
 * One record of {@code orders}, decoded: a valid order (reason null), or the reason it is not one. The raw value is
 * kept either way, so a dead letter (or a late order) carries the record whole. A Flink POJO: public fields, no-arg
 * constructor.
 */
public class DecodedOrder {
    public String orderId;
    public String supplier;
    public String item;
    /** Exact, at most DECIMAL(10,2). */
    public BigDecimal price;
    public long bidTimeMs;
    /** Null in records written before the source had the column. */
    public String currency;
    /** Null for a valid order, else why the record is not one. */
    public String reason;
    public byte[] raw;

    public DecodedOrder() {}

    /** A reason longer than this is cut (the record itself always goes whole). */
    public static final int MAX_REASON = 1000;

    public static DecodedOrder bad(byte[] raw, String reason) {
        DecodedOrder d = new DecodedOrder();
        d.raw = raw;
        d.reason = reason.length() > MAX_REASON ? reason.substring(0, MAX_REASON) : reason;
        return d;
    }

    public boolean isValid() {
        return reason == null;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof DecodedOrder)) {
            return false;
        }
        DecodedOrder d = (DecodedOrder) o;
        return bidTimeMs == d.bidTimeMs && Objects.equals(orderId, d.orderId) && Objects.equals(supplier, d.supplier)
                && Objects.equals(item, d.item) && Objects.equals(price, d.price)
                && Objects.equals(currency, d.currency) && Objects.equals(reason, d.reason)
                && Arrays.equals(raw, d.raw);
    }

    @Override
    public int hashCode() {
        return Objects.hash(orderId, supplier, item, price, bidTimeMs, currency, reason, Arrays.hashCode(raw));
    }

    @Override
    public String toString() {
        return isValid()
                ? "Order(" + orderId + ", " + supplier + ", " + item + ", " + price + ", " + bidTimeMs + ", "
                        + currency + ")"
                : "BadRecord(" + reason + ")";
    }
}
