package lab.lineage.orders.flink;

import java.math.BigDecimal;
import java.time.Duration;
import lab.lineage.orders.DecodedOrder;
import lab.lineage.orders.OrderRule;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * supplier-stats' per-record path, built by the PyFlink job around its decoded Kafka source: valid orders keyed by
 * supplier into tumbling event-time windows (sum of price, exact, and count), bad records and orders later than the
 * allowed lateness into one dead-letter stream with their reason. The job wires both streams to its Kafka sinks.
 */
public final class SupplierStatsTopology {
    /** Rows the job's SQL sinks take: window_start, window_end, supplier, total_price, count. */
    public static final RowTypeInfo STATS = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.STRING, Types.STRING, Types.DOUBLE, Types.LONG},
            new String[] {"window_start", "window_end", "supplier", "total_price", "count"});
    /** Dead letters: the record whole and why. */
    public static final RowTypeInfo DEAD_LETTER = new RowTypeInfo(
            new TypeInformation<?>[] {Types.PRIMITIVE_ARRAY(Types.BYTE), Types.STRING},
            new String[] {"raw_value", "reason"});

    private final SingleOutputStreamOperator<Row> stats;
    private final DataStream<Row> deadLetters;

    private SupplierStatsTopology(SingleOutputStreamOperator<Row> stats, DataStream<Row> deadLetters) {
        this.stats = stats;
        this.deadLetters = deadLetters;
    }

    public DataStream<Row> stats() {
        return stats;
    }

    public DataStream<Row> deadLetters() {
        return deadLetters;
    }

    /**
     * What the windows need of a valid order, as a tuple (serialized without reflection between the source and the
     * window tasks): supplier, price in cents (exact: the rule holds prices to DECIMAL(10,2)), bid_time in epoch ms,
     * and the raw record for a late order's dead letter.
     */
    static final TypeInformation<Tuple4<String, Long, Long, byte[]>> WINDOW_ORDER =
            Types.TUPLE(Types.STRING, Types.LONG, Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE));

    public static SupplierStatsTopology build(
            DataStream<DecodedOrder> decoded, long windowMs, long outOfOrdernessMs, long allowedLatenessMs) {
        OutputTag<Row> bad = new OutputTag<>("dead-letters", DEAD_LETTER);
        OutputTag<Tuple4<String, Long, Long, byte[]>> late = new OutputTag<>("late-orders", WINDOW_ORDER);
        SingleOutputStreamOperator<Tuple4<String, Long, Long, byte[]>> valid = decoded
                .process(new SplitBad(bad))
                .returns(WINDOW_ORDER)
                .name("valid orders")
                .uid("valid-orders");
        SingleOutputStreamOperator<Row> stats = valid
                .keyBy(order -> order.f0, Types.STRING)
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(windowMs)))
                .allowedLateness(Duration.ofMillis(allowedLatenessMs))
                .sideOutputLateData(late)
                .aggregate(new SumAndCount(), new WithWindow(), SumAndCount.TYPE, SumAndCount.TYPE, STATS)
                .name("per-supplier windows")
                .uid("supplier-windows");
        String lateness = "out-of-orderness " + outOfOrdernessMs / 1000 + " s + allowed lateness "
                + allowedLatenessMs / 1000 + " s";
        DataStream<Row> lateLetters = stats.getSideOutput(late)
                .process(new LateReason(lateness))
                .returns(DEAD_LETTER)
                .name("late orders")
                .uid("late-orders");
        return new SupplierStatsTopology(stats, valid.getSideOutput(bad).union(lateLetters));
    }

    /** Valid orders go on (as the windows' tuple), every other record to the dead letters with its reason. */
    static final class SplitBad extends ProcessFunction<DecodedOrder, Tuple4<String, Long, Long, byte[]>> {
        private static final long serialVersionUID = 1L;
        private final OutputTag<Row> bad;

        SplitBad(OutputTag<Row> bad) {
            this.bad = bad;
        }

        @Override
        public void processElement(
                DecodedOrder order, Context ctx, Collector<Tuple4<String, Long, Long, byte[]>> out) {
            if (order.isValid()) {
                long cents = order.price.movePointRight(OrderRule.PRICE_SCALE).longValueExact();
                out.collect(Tuple4.of(order.supplier, cents, order.bidTimeMs, order.raw));
            } else {
                ctx.output(bad, Row.of(order.raw, order.reason));
            }
        }
    }

    /**
     * A late order's dead letter: its bid_time and where the event-time clock already was (moved by later orders, or
     * by processing time on a quiet stream), so the reason says why its window had closed.
     */
    static final class LateReason extends ProcessFunction<Tuple4<String, Long, Long, byte[]>, Row> {
        private static final long serialVersionUID = 1L;
        private final String lateness;

        LateReason(String lateness) {
            this.lateness = lateness;
        }

        @Override
        public void processElement(Tuple4<String, Long, Long, byte[]> order, Context ctx, Collector<Row> out) {
            long clock = ctx.timerService().currentWatermark();
            String at = clock == Long.MIN_VALUE ? "" : "event time already at " + OrderRule.utcText(clock) + "; ";
            out.collect(Row.of(order.f3, "late: bid_time " + OrderRule.utcText(order.f2)
                    + " arrived after its window closed (" + at + lateness + ")"));
        }
    }

    /** Exact sum (in cents) and count; the double is made once, at the window's end. */
    static final class SumAndCount
            implements AggregateFunction<Tuple4<String, Long, Long, byte[]>, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        private static final long serialVersionUID = 1L;
        static final TypeInformation<Tuple2<Long, Long>> TYPE = Types.TUPLE(Types.LONG, Types.LONG);

        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return Tuple2.of(0L, 0L);
        }

        @Override
        public Tuple2<Long, Long> add(Tuple4<String, Long, Long, byte[]> order, Tuple2<Long, Long> acc) {
            acc.f0 = Math.addExact(acc.f0, order.f1);
            acc.f1 = acc.f1 + 1;
            return acc;
        }

        @Override
        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> acc) {
            return acc;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(Math.addExact(a.f0, b.f0), a.f1 + b.f1);
        }
    }

    /** The window's bounds in the reference's format and the total (the double nearest the exact sum). */
    static final class WithWindow extends ProcessWindowFunction<Tuple2<Long, Long>, Row, String, TimeWindow> {
        private static final long serialVersionUID = 1L;

        @Override
        public void process(String supplier, Context context, Iterable<Tuple2<Long, Long>> sums, Collector<Row> out) {
            TimeWindow window = context.window();
            for (Tuple2<Long, Long> sum : sums) {
                double total = BigDecimal.valueOf(sum.f0, OrderRule.PRICE_SCALE).doubleValue();
                out.collect(Row.of(OrderRule.utcText(window.getStart()), OrderRule.utcText(window.getEnd()),
                        supplier, total, sum.f1));
            }
        }
    }
}
