package lab.lineage.orders.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import lab.lineage.orders.DecodedOrder;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;

/** The topology on a local Flink: exact windows per supplier, bad records dead-lettered with their reason. */
class SupplierStatsTopologyTest {
    static final long START = Instant.parse("2026-11-23T12:00:00Z").toEpochMilli();

    @Test
    void windowsAreExactAndBadRecordsAreDeadLettered() throws Exception {
        Random rng = new Random(3);
        List<DecodedOrder> input = new ArrayList<>();
        Map<String, BigDecimal> sums = new HashMap<>();
        Map<String, Long> counts = new HashMap<>();
        for (int i = 0; i < 2000; i++) {
            DecodedOrder o = new DecodedOrder();
            o.orderId = "o-" + i;
            o.supplier = rng.nextBoolean() ? "Alice" : "Bob";
            o.item = "Pen";
            o.price = BigDecimal.valueOf(rng.nextInt(15000) + 1, 2);
            o.bidTimeMs = START + i * 10L;
            o.raw = new byte[] {(byte) i};
            input.add(o);
            String key = Instant.ofEpochMilli(o.bidTimeMs - o.bidTimeMs % 5000).toString().replace(".000", "")
                    + "|" + o.supplier;
            sums.merge(key, o.price, BigDecimal::add);
            counts.merge(key, 1L, Long::sum);
            if (i == 1000) {
                DecodedOrder farFuture = DecodedOrder.bad(new byte[] {9, 9}, "bid_time 9999-12-31T23:59:59Z is ...");
                farFuture.bidTimeMs = Instant.parse("9999-12-31T23:59:59Z").toEpochMilli();
                input.add(farFuture);
            }
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(2);
        DataStream<DecodedOrder> decoded = env.fromData(input, TypeInformation.of(DecodedOrder.class))
                .setParallelism(1)
                .assignTimestampsAndWatermarks(OrderWatermarks.strategy(5000, 60_000, 10_000)).setParallelism(1);
        SupplierStatsTopology topology = SupplierStatsTopology.build(decoded, 5000, 5000, 5000);
        CloseableIterator<Row> stats = topology.stats().collectAsync();
        CloseableIterator<Row> dead = topology.deadLetters().collectAsync();
        JobClient job = env.executeAsync("supplier-stats-test");

        Map<String, Row> byWindow = new HashMap<>();
        stats.forEachRemaining(row -> {
            Row previous = byWindow.put(row.getField(0) + "|" + row.getField(2), row);
            assertEquals(null, previous, "one record per window");
        });
        List<Row> letters = new ArrayList<>();
        dead.forEachRemaining(letters::add);
        job.getJobExecutionResult().get();

        assertEquals(sums.keySet(), byWindow.keySet());
        for (Map.Entry<String, Row> e : byWindow.entrySet()) {
            assertEquals(sums.get(e.getKey()).doubleValue(), (Double) e.getValue().getField(3), 1e-9, e.getKey());
            assertEquals(counts.get(e.getKey()), e.getValue().getField(4), e.getKey());
            String start = (String) e.getValue().getField(0);
            assertEquals(Instant.parse(start).plusSeconds(5).toString(), e.getValue().getField(1));
        }
        assertEquals(1, letters.size());
        assertTrue(((String) letters.get(0).getField(1)).startsWith("bid_time 9999-12-31T23:59:59Z"));
        assertEquals(2000L, byWindow.values().stream().mapToLong(r -> (Long) r.getField(4)).sum(),
                "every order after the far-future one is counted");
    }
}
