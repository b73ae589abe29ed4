package lab.lineage.orders.flink;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;
import lab.lineage.orders.DecodeSettings;
import lab.lineage.orders.DecodedOrder;
import lab.lineage.orders.OrderDecoder;
import lab.lineage.orders.OrderRule;
import lab.lineage.orders.lineage.FieldOrigins;
import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.FunctionHint;
import org.apache.flink.table.functions.FunctionContext;
import org.apache.flink.table.functions.TableFunction;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;

/**
 * iceberg-ingestion's decoder: value BYTES -> exactly one row, a valid order (error NULL) or the reason it is not one
 * (error set, order fields NULL). Registered by the PyFlink job as {@code decode_order}; a bad record never throws.
 * Each order field is the same-named field of the Avro record in the value, which it tells the job's column lineage
 * ({@link FieldOrigins}); the error is about the record as a whole.
 */
@FunctionHint(output = @DataTypeHint(value = "ROW<order_id STRING, supplier STRING, item STRING, "
        + "price DECIMAL(10, 2), bid_time TIMESTAMP(3), currency STRING, error STRING>", bridgedTo = RowData.class))
public class DecodeOrderFunction extends TableFunction<RowData> implements FieldOrigins {
    private static final long serialVersionUID = 1L;
    /** Output field -> field of the Avro record it is decoded from (the output row's names, as in the hint). */
    private static final Map<String, String> FIELD_ORIGINS = Map.of("order_id", "order_id", "supplier", "supplier",
            "item", "item", "price", "price", "bid_time", "bid_time", "currency", "currency");

    private final DecodeSettings settings;
    private transient OrderDecoder decoder;

    public DecodeOrderFunction(DecodeSettings settings) {
        this.settings = settings;
    }

    @Override
    public void open(FunctionContext context) {
        decoder = settings.newDecoder();
    }

    /** Emits Flink's internal row format directly: no per-field conversion from an external Row. */
    public void eval(byte[] value) {
        DecodedOrder order;
        try {
            order = decoder.decode(value);
        } catch (IOException e) {
            throw new UncheckedIOException("the schema registry cannot answer; the job retries from its checkpoint",
                    e);
        }
        GenericRowData row = new GenericRowData(7);
        if (!order.isValid()) {
            row.setField(6, StringData.fromString(order.reason));
            collect(row);
            return;
        }
        row.setField(0, StringData.fromString(order.orderId));
        row.setField(1, StringData.fromString(order.supplier));
        row.setField(2, StringData.fromString(order.item));
        row.setField(3, DecimalData.fromBigDecimal(order.price, OrderRule.PRICE_PRECISION, OrderRule.PRICE_SCALE));
        row.setField(4, TimestampData.fromEpochMillis(order.bidTimeMs));
        row.setField(5, order.currency == null ? null : StringData.fromString(order.currency));
        collect(row);
    }

    @Override
    public Map<String, String> fieldOrigins() {
        return FIELD_ORIGINS;
    }

    @Override
    public String toString() {
        return "DecodeOrderFunction(" + settings + ")";
    }
}
