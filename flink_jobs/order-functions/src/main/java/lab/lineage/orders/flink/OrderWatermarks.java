package lab.lineage.orders.flink;

import java.time.Duration;
import lab.lineage.orders.DecodedOrder;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.eventtime.WatermarksWithIdleness;
import org.apache.flink.util.clock.RelativeClock;

/**
 * supplier-stats' event-time clock, run inside the Kafka source (one generator per partition): bid_time of valid
 * orders only, bounded out-of-orderness, a partition idle after a while without valid orders. A bad record (and an
 * order outside the plausibility window is one) never moves the clock nor keeps a partition active.
 *
 * <p>A quiet stream still closes its windows: once a partition that has seen an order has had no valid order for
 * {@code quietAdvanceMs} (of the source's input-activity clock, processing time that stands still while the source is
 * back-pressured), its watermark advances from (newest bid_time - out-of-orderness) at the rate that clock passes,
 * until the partition goes idle. A partition that never saw an order emits nothing and goes idle as Flink's
 * {@link WatermarksWithIdleness} makes it, so it holds the others back only for the idleness after a start (then a
 * backlog on it is not made late). The watermark never goes backwards.
 */
public final class OrderWatermarks {
    private OrderWatermarks() {}

    public static WatermarkStrategy<DecodedOrder> strategy(long outOfOrdernessMs, long idlenessMs,
            long quietAdvanceMs) {
        if (outOfOrdernessMs < 0 || quietAdvanceMs < 0 || idlenessMs <= quietAdvanceMs) {
            throw new IllegalArgumentException("need 0 <= out-of-orderness, 0 <= quiet advance < idleness; got "
                    + outOfOrdernessMs + ", " + quietAdvanceMs + ", " + idlenessMs + " ms");
        }
        Duration idleness = Duration.ofMillis(idlenessMs);
        WatermarkStrategy<DecodedOrder> base = context -> {
            RelativeClock clock = context.getInputActivityClock();
            return new ValidOrdersOnly(new WatermarksWithIdleness<>(
                    new QuietAdvance(outOfOrdernessMs, quietAdvanceMs, clock), idleness, clock));
        };
        return base.withTimestampAssigner((order, kafkaTimestamp) -> order.isValid() ? order.bidTimeMs
                : kafkaTimestamp);
    }

    /**
     * Bounded out-of-orderness (as Flink's BoundedOutOfOrdernessWatermarks: newest timestamp - bound - 1) that moves on
     * with the clock after {@code quietAdvanceMs} without an event, once it has seen one. Quiet is measured like
     * {@link WatermarksWithIdleness} measures inactivity: from the first periodic emit that finds no new event, with
     * no clock read per event.
     */
    static final class QuietAdvance implements WatermarkGenerator<DecodedOrder> {
        private final long outOfOrdernessMs;
        private final long quietAdvanceNanos;
        private final RelativeClock clock;
        private long maxTimestamp = Long.MIN_VALUE;
        private boolean seen;
        private long events;
        private long eventsAtLastEmit;
        private long quietSinceNanos;
        private long current = Long.MIN_VALUE;

        QuietAdvance(long outOfOrdernessMs, long quietAdvanceMs, RelativeClock clock) {
            this.outOfOrdernessMs = outOfOrdernessMs;
            this.quietAdvanceNanos = Duration.ofMillis(quietAdvanceMs).toNanos();
            this.clock = clock;
        }

        @Override
        public void onEvent(DecodedOrder event, long eventTimestamp, WatermarkOutput output) {
            maxTimestamp = Math.max(maxTimestamp, eventTimestamp);
            seen = true;
            events++;
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            if (!seen) {
                return; // no clock to move: WatermarksWithIdleness marks the partition idle in time
            }
            long now = clock.relativeTimeNanos();
            if (events != eventsAtLastEmit) {
                eventsAtLastEmit = events;
                quietSinceNanos = now;
            }
            long watermark = maxTimestamp - outOfOrdernessMs - 1;
            long quietFor = now - quietSinceNanos - quietAdvanceNanos;
            if (quietFor > 0) {
                watermark = saturatedAdd(watermark, quietFor / 1_000_000);
            }
            current = Math.max(current, watermark);
            output.emitWatermark(new Watermark(current));
        }

        private static long saturatedAdd(long a, long b) {
            long sum = a + b;
            return ((a ^ sum) & (b ^ sum)) < 0 ? Long.MAX_VALUE : sum;
        }
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
