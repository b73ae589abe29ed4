package lab.lineage.orders.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import lab.lineage.orders.DecodedOrder;
import org.apache.flink.api.common.eventtime.BoundedOutOfOrdernessWatermarks;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.junit.jupiter.api.Test;

class OrderWatermarksTest {
    static DecodedOrder order(long bidMs) {
        DecodedOrder o = new DecodedOrder();
        o.orderId = "o";
        o.supplier = "Alice";
        o.price = new BigDecimal("1.00");
        o.bidTimeMs = bidMs;
        return o;
    }

    static final class Recorded implements WatermarkOutput {
        final List<Long> watermarks = new ArrayList<>();

        @Override
        public void emitWatermark(Watermark watermark) {
            watermarks.add(watermark.getTimestamp());
        }

        @Override
        public void markIdle() {}

        @Override
        public void markActive() {}
    }

    @Test
    void aBadRecordNeverMovesTheClock() {
        var generator = new OrderWatermarks.ValidOrdersOnly(
                new BoundedOutOfOrdernessWatermarks<>(java.time.Duration.ofSeconds(5)));
        Recorded out = new Recorded();
        generator.onEvent(order(100_000), 100_000, out);
        generator.onPeriodicEmit(out);
        DecodedOrder farFuture = DecodedOrder.bad(new byte[] {1}, "bid_time 9999-12-31T23:59:59Z is more than ...");
        farFuture.bidTimeMs = 253_402_300_799_000L;
        generator.onEvent(farFuture, 253_402_300_799_000L, out);
        generator.onPeriodicEmit(out);
        generator.onEvent(order(101_000), 101_000, out);
        generator.onPeriodicEmit(out);
        assertEquals(List.of(94_999L, 94_999L, 95_999L), out.watermarks);
    }
}
