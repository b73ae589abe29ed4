package lab.lineage.orders.flink;

import java.time.Duration;
import lab.lineage.orders.DecodedOrder;
import org.apache.flink.api.common.eventtime.BoundedOutOfOrdernessWatermarks;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.eventtime.WatermarksWithIdleness;

/**
 * supplier-stats' event-time clock, run inside the Kafka source (one generator per partition): bid_time of valid
 * orders only, bounded out-of-orderness, a partition idle after a while without valid orders. A bad record (and an
 * order outside the plausibility window is one) never moves the clock nor keeps a partition active.
 */
public final class OrderWatermarks {
    private OrderWatermarks() {}

    public static WatermarkStrategy<DecodedOrder> strategy(long outOfOrdernessMs, long idlenessMs) {
        Duration bound = Duration.ofMillis(outOfOrdernessMs);
        Duration idleness = Duration.ofMillis(idlenessMs);
        WatermarkStrategy<DecodedOrder> base = context -> new ValidOrdersOnly(new WatermarksWithIdleness<>(
                new BoundedOutOfOrdernessWatermarks<>(bound), idleness, context.getInputActivityClock()));
        return base.withTimestampAssigner((order, kafkaTimestamp) -> order.isValid() ? order.bidTimeMs
                : kafkaTimestamp);
    }

    /** Hands only valid orders to the wrapped generator; periodic emission is unchanged. */
    static final class ValidOrdersOnly implements WatermarkGenerator<DecodedOrder> {
        private final WatermarkGenerator<DecodedOrder> inner;

        ValidOrdersOnly(WatermarkGenerator<DecodedOrder> inner) {
            this.inner = inner;
        }

        @Override
        public void onEvent(DecodedOrder event, long eventTimestamp, WatermarkOutput output) {
            if (event.isValid()) {
                inner.onEvent(event, eventTimestamp, output);
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            inner.onPeriodicEmit(output);
        }
    }
}
