package lab.lineage.orders.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import lab.lineage.orders.DecodedOrder;
import org.apache.flink.api.common.eventtime.BoundedOutOfOrdernessWatermarks;
import org.apache.flink.api.common.eventtime.TimestampAssigner;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkGeneratorSupplier;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkOutputMultiplexer;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.util.clock.ManualClock;
import org.apache.flink.util.clock.RelativeClock;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The per-partition generator of supplier-stats, driven by a manual clock at Flink's 200 ms emit interval. */
class OrderWatermarksTest {
    static final long OOO = 5_000;
    static final long IDLENESS = 60_000;
    static final long QUIET = 10_000;
    static final long T0 = 1_700_000_000_000L;

    final ManualClock clock = new ManualClock(1_000_000_000L);
    final WatermarkStrategy<DecodedOrder> strategy = OrderWatermarks.strategy(OOO, IDLENESS, QUIET);
    final TimestampAssigner<DecodedOrder> timestamps = strategy.createTimestampAssigner(null);

    /** What one partition's generator told its output. */
    static final class Recorded implements WatermarkOutput {
        final List<Long> watermarks = new ArrayList<>();
        boolean idle;

        @Override
        public void emitWatermark(Watermark watermark) {
            watermarks.add(watermark.getTimestamp());
            idle = false;
        }

        @Override
        public void markIdle() {
            idle = true;
        }

        @Override
        public void markActive() {
            idle = false;
        }

        long last() {
            return watermarks.isEmpty() ? Long.MIN_VALUE : watermarks.get(watermarks.size() - 1);
        }
    }

    final class Partition {
        final WatermarkGenerator<DecodedOrder> generator = strategy.createWatermarkGenerator(context(clock));
        final WatermarkOutput output;

        Partition(WatermarkOutput output) {
            this.output = output;
        }

        void order(long bidTimeMs) {
            DecodedOrder order = valid(bidTimeMs);
            generator.onEvent(order, timestamps.extractTimestamp(order, -1), output);
        }

        void emit() {
            generator.onPeriodicEmit(output);
        }
    }

    Partition a;
    Recorded outA;

    @BeforeEach
    void partitionA() {
        outA = new Recorded();
        a = new Partition(outA);
    }

    static WatermarkGeneratorSupplier.Context context(RelativeClock clock) {
        return new WatermarkGeneratorSupplier.Context() {
            @Override
            public MetricGroup getMetricGroup() {
                return new UnregisteredMetricsGroup();
            }

            @Override
            public RelativeClock getInputActivityClock() {
                return clock;
            }
        };
    }

    static DecodedOrder valid(long bidTimeMs) {
        DecodedOrder order = new DecodedOrder();
        order.orderId = "o-" + bidTimeMs;
        order.supplier = "Alice";
        order.item = "Lamp";
        order.price = new BigDecimal("1.00");
        order.bidTimeMs = bidTimeMs;
        order.raw = new byte[0];
        return order;
    }

    /** Passes {@code ms} of processing time, one periodic emit every 200 ms (each partition given). */
    void pass(long ms, Partition... partitions) {
        for (long t = 0; t < ms; t += 200) {
            clock.advanceTime(Duration.ofMillis(200));
            for (Partition p : partitions) {
                p.emit();
            }
        }
    }

    @Test
    void anActivePartitionKeepsBoundedOutOfOrderness() {
        for (int i = 0; i < 100; i++) { // an order every second for 100 s: never quiet for the setting
            a.order(T0 + i * 1000L);
            pass(1000, a);
            assertEquals(T0 + i * 1000L - OOO - 1, outA.last());
        }
        assertFalse(outA.idle);
    }

    @Test
    void aQuietPartitionAdvancesWithProcessingTimeAfterTheSettingThenGoesIdle() {
        a.order(T0);
        pass(200, a); // the emit that notices the order: quiet starts here
        assertEquals(T0 - OOO - 1, outA.last());
        pass(QUIET, a);
        assertEquals(T0 - OOO - 1, outA.last(), "no advance within the setting");
        pass(OOO + 5_000, a);
        assertEquals(T0 - OOO - 1 + OOO + 5_000, outA.last(), "then at the rate of processing time");
        assertTrue(outA.last() >= T0 + 5_000 - 1, "the window of its newest order (5 s) has closed");
        pass(IDLENESS - QUIET - OOO - 5_000 - 400, a);
        assertFalse(outA.idle);
        pass(1_000, a);
        assertTrue(outA.idle, "idle after the idleness, as before");
        long atIdle = outA.last();
        assertTrue(atIdle >= T0 + IDLENESS - QUIET - OOO - 1, "advanced all the way until it went idle");
        int emitted = outA.watermarks.size();
        pass(60_000, a);
        assertEquals(emitted, outA.watermarks.size(), "an idle partition emits nothing");
    }

    @Test
    void theWatermarkNeverGoesBackwards() {
        a.order(T0);
        pass(200 + QUIET + 20_000, a);
        long advanced = outA.last();
        assertEquals(T0 - OOO - 1 + 20_000, advanced);
        a.order(T0 - 30_000); // older than the clock now: a late order, it moves nothing back
        a.order(T0 + 1_000); // newer, but its bounded watermark is behind the advanced one
        pass(1_000, a);
        for (int i = 1; i < outA.watermarks.size(); i++) {
            assertTrue(outA.watermarks.get(i) >= outA.watermarks.get(i - 1), "monotonic at " + i);
        }
        assertEquals(advanced, outA.last(), "activity again: the advanced clock holds until orders pass it");
        pass(QUIET + 1_000, a);
        assertEquals(advanced, outA.last(), "quiet again: the newest order's advance is still behind");
        pass(19_000, a); // quiet for 30.8 s since the emit after the orders
        assertEquals(T0 + 1_000 - OOO - 1 + 20_800, outA.last(), "then it moves on from the newest order");
    }

    @Test
    void badRecordsNeitherMoveTheClockNorCountAsActivity() {
        a.order(T0);
        pass(200, a);
        for (int i = 0; i < 100; i++) {
            DecodedOrder bad = DecodedOrder.bad(new byte[] {1}, "junk");
            a.generator.onEvent(bad, timestamps.extractTimestamp(bad, T0 + 999_999), a.output);
            pass(200, a);
        }
        assertEquals(T0 - OOO - 1 + (100 * 200 - QUIET), outA.last(), "quiet since the valid order");
    }

    @Test
    void aPartitionNeverSeenStaysIdleAndHoldsNoOneBack() {
        Recorded combined = new Recorded();
        WatermarkOutputMultiplexer multiplexer = new WatermarkOutputMultiplexer(combined);
        multiplexer.registerNewOutput("orders-0", watermark -> {});
        multiplexer.registerNewOutput("orders-1", watermark -> {});
        Partition seen = new Partition(multiplexer.getDeferredOutput("orders-0"));
        Partition never = new Partition(multiplexer.getDeferredOutput("orders-1"));
        Partition[] both = {seen, never};

        pass(IDLENESS + 400, both);
        multiplexer.onPeriodicEmit();
        assertTrue(combined.idle, "a partition without an order goes idle after the idleness, as before");

        seen.order(T0); // 30 orders for a new supplier, then silence
        for (int i = 1; i < 30; i++) {
            seen.order(T0 + i * 100L);
        }
        long newest = T0 + 2_900;
        for (long t = 0; t < QUIET + OOO + 5_000 + 400; t += 200) {
            pass(200, both);
            multiplexer.onPeriodicEmit();
        }
        assertTrue(combined.last() >= newest + 5_000 - 1,
                "within window + out-of-orderness + the setting the windows of all 30 have closed: " + combined.last());
        List<Long> seenOnce = new ArrayList<>(combined.watermarks);
        for (int i = 1; i < seenOnce.size(); i++) {
            assertTrue(seenOnce.get(i) >= seenOnce.get(i - 1));
        }
        for (long t = 0; t < IDLENESS; t += 200) {
            pass(200, both);
            multiplexer.onPeriodicEmit();
        }
        assertTrue(combined.idle, "every partition idle: the combined clock holds where it got to");
    }

    @Test
    void aBadRecordNeverMovesTheClock() {
        var generator = new OrderWatermarks.ValidOrdersOnly(
                new BoundedOutOfOrdernessWatermarks<>(Duration.ofSeconds(5)));
        Recorded out = new Recorded();
        generator.onEvent(valid(100_000), 100_000, out);
        generator.onPeriodicEmit(out);
        DecodedOrder farFuture = DecodedOrder.bad(new byte[] {1}, "bid_time 9999-12-31T23:59:59Z is more than ...");
        farFuture.bidTimeMs = 253_402_300_799_000L;
        generator.onEvent(farFuture, 253_402_300_799_000L, out);
        generator.onPeriodicEmit(out);
        generator.onEvent(valid(101_000), 101_000, out);
        generator.onPeriodicEmit(out);
        assertEquals(List.of(94_999L, 94_999L, 95_999L), out.watermarks);
    }

    @Test
    void settingsOutOfRangeAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> OrderWatermarks.strategy(OOO, IDLENESS, -1));
        assertThrows(IllegalArgumentException.class, () -> OrderWatermarks.strategy(OOO, IDLENESS, IDLENESS));
    }
}
