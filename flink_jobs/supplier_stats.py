"""supplier-stats (DataStream API): Kafka `orders` -> per-supplier 5 s tumbling windows -> Kafka `supplier-stats`.

The reference lab's windowing: event time from bid_time, bounded out-of-orderness 5 s, idleness 60 s, keyed by
supplier, tumbling 5 s windows, allowed lateness 5 s, sum of price (as double, 2 places) and count. Unlike the
reference it checkpoints (exactly-once: source offsets in the checkpoint, Kafka transactions on both outputs) and
loses nothing: records that are not orders and records later than the allowed lateness go to the dead-letter topic
with the reason. decodable-in = counted in windows + dead-lettered.

Event time per Kafka partition: PyFlink cannot run a Python timestamp assigner inside the Kafka source, so the job
runs with one subtask per partition (--source-parallelism): each watermark assigner sees one partition, and the
window operators take the minimum watermark over partitions, as a per-partition source watermark would.

Outputs go through Flink's Kafka table connector, the one PyFlink sink that writes a key column and registers the
Avro value schema (`supplier-stats-value`) itself.
"""

from __future__ import annotations

import argparse
import datetime as dt
from decimal import Decimal

import connections
from orders_codec import BadRecord, RegistrySchemas, decode_order
from pyflink.common import Duration, Row, Time, Types, WatermarkStrategy
from pyflink.common.serialization import ByteArraySchema
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import (
    AggregateFunction,
    CheckpointingMode,
    OutputTag,
    ProcessFunction,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.kafka import KafkaOffsetResetStrategy, KafkaOffsetsInitializer, KafkaSource
from pyflink.datastream.window import TumblingEventTimeWindows
from pyflink.table import StreamTableEnvironment
from valid_order import OrderRule

WINDOW = Time.seconds(5)  # PyFlink's window assigners take Time, watermark strategies Duration
OUT_OF_ORDERNESS_S = 5
IDLENESS_S = 60
ALLOWED_LATENESS_MS = 5_000


def order_type():
    """A fresh type per use: PyFlink caches Java objects on type infos, and a tag pickled into an operator must
    not carry one (cannot pickle '_thread.RLock')."""
    return Types.ROW_NAMED(
        ["supplier", "price", "bid_time_ms", "raw"],
        [Types.STRING(), Types.BIG_DEC(), Types.LONG(), Types.PRIMITIVE_ARRAY(Types.BYTE())],
    )


def dead_letter_type():
    return Types.ROW_NAMED(["raw_value", "reason"], [Types.PRIMITIVE_ARRAY(Types.BYTE()), Types.STRING()])


STATS = Types.ROW_NAMED(
    ["window_start", "window_end", "supplier", "total_price", "count"],
    [Types.STRING(), Types.STRING(), Types.STRING(), Types.DOUBLE(), Types.LONG()],
)
DEAD = OutputTag("dead-letters", dead_letter_type())
LATE = OutputTag("late-orders", order_type())


def utc_text(epoch_ms: int) -> str:
    """The reference's window bound format: yyyy-MM-ddTHH:mm:ssZ in UTC."""
    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class DecodeOrders(ProcessFunction):
    """raw value -> a valid order row, or a dead letter with the reason (side output): an order outside the
    plausibility window never reaches the watermark assigner."""

    def __init__(self, registry_url: str, rule: OrderRule, registry_user_info: str = ""):
        self.registry_url = registry_url
        self.rule = rule
        self.registry_user_info = registry_user_info

    def open(self, runtime_context):
        self._schemas = RegistrySchemas(self.registry_url, user_info=self.registry_user_info)

    def process_element(self, value, ctx):
        try:
            order = decode_order(value, self._schemas, self.rule)
        except BadRecord as bad:
            yield DEAD, Row(raw_value=value, reason=str(bad)[:1000])
            return
        yield Row(supplier=order.supplier, price=order.price, bid_time_ms=order.bid_time_ms, raw=value)


class BidTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp: int) -> int:
        return value.bid_time_ms


class SumAndCount(AggregateFunction):
    """Exact decimal sum and count; the double is made once, at the window's end."""

    def create_accumulator(self):
        return [Decimal(0), 0]

    def add(self, value, accumulator):
        accumulator[0] += value.price
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


class WithWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        for total, count in elements:
            window = context.window()
            yield Row(
                window_start=utc_text(window.start),
                window_end=utc_text(window.end),
                supplier=key,
                total_price=round(float(total), 2),
                count=count,
            )


def late_letter(order: Row) -> Row:
    reason = (
        f"late: bid_time {utc_text(order.bid_time_ms)} arrived after its window closed "
        f"(out-of-orderness {OUT_OF_ORDERNESS_S} s + "
        f"allowed lateness {ALLOWED_LATENESS_MS // 1000} s)"
    )
    return Row(raw_value=order.raw, reason=reason)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--registry", default="http://127.0.0.1:8085/apis/ccompat/v7")
    p.add_argument("--source-topic", default="orders")
    p.add_argument("--source-parallelism", type=int, default=1, help="one subtask per partition of the topic")
    p.add_argument("--sink-topic", default="supplier-stats")
    p.add_argument("--dlq-topic", default="orders-dlq-supplier-stats")
    p.add_argument("--group-id", default="supplier-stats")
    p.add_argument("--checkpoint-interval-ms", type=int, default=10_000)
    p.add_argument("--dlq-max-bytes", type=int, default=4 * 1024 * 1024, help="largest dead letter the job sends")
    p.add_argument("--max-future-s", type=int, default=OrderRule.max_future_s, help="plausibility window ahead")
    p.add_argument("--max-past-s", type=int, default=OrderRule.max_past_s, help="plausibility window behind")
    p.add_argument("--version", default="dev", help="deployment version, readable in the job's config over REST")
    a, _ = p.parse_known_args()

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(a.source_parallelism)  # every operator: Python ops only chain at equal parallelism
    env.enable_checkpointing(a.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    env.get_config().set_global_job_parameters({"lineage-lab.version": a.version})
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set("pipeline.name", "supplier-stats")
    t_env.get_config().set("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")

    builder = KafkaSource.builder()
    for key, value in connections.kafka_properties().items():  # a secured cluster's client settings
        builder = builder.set_property(key, value)
    source = (
        builder.set_bootstrap_servers(a.bootstrap)
        .set_topics(a.source_topic)
        .set_group_id(a.group_id)
        .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST))
        .set_value_only_deserializer(ByteArraySchema())
        .set_property("isolation.level", "read_committed")
        .set_property("commit.offsets.on.checkpoint", "true")
        .build()
    )
    raw = env.from_source(source, WatermarkStrategy.no_watermarks(), "orders")
    rule = OrderRule(a.max_future_s, a.max_past_s)
    decoded = raw.process(DecodeOrders(a.registry, rule, connections.registry_user_info()), output_type=order_type())
    timed = decoded.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(OUT_OF_ORDERNESS_S))
        .with_idleness(Duration.of_seconds(IDLENESS_S))
        .with_timestamp_assigner(BidTime())
    )
    stats = (
        timed.key_by(lambda order: order.supplier, key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(WINDOW))
        .allowed_lateness(ALLOWED_LATENESS_MS)
        .side_output_late_data(LATE)
        .aggregate(SumAndCount(), WithWindow(), accumulator_type=Types.PICKLED_BYTE_ARRAY(), output_type=STATS)
    )
    late = stats.get_side_output(LATE).map(late_letter, output_type=dead_letter_type())
    dead = decoded.get_side_output(DEAD).union(late)

    kafka_options = connections.kafka_sql_options()
    registry_options = connections.registry_sql_options("value.avro-confluent")
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE supplier_stats_sink (
            window_start STRING NOT NULL,
            window_end STRING NOT NULL,
            supplier STRING NOT NULL,
            total_price DOUBLE NOT NULL,
            `count` BIGINT NOT NULL
        ) WITH (
            'connector' = 'kafka',
            'topic' = '{a.sink_topic}',
            'properties.bootstrap.servers' = '{a.bootstrap}',
            'properties.transaction.timeout.ms' = '600000',
            'sink.delivery-guarantee' = 'exactly-once',
            'sink.transactional-id-prefix' = 'supplier-stats',
            'key.format' = 'raw',
            'key.fields' = 'supplier',
            'value.format' = 'avro-confluent',
            'value.avro-confluent.url' = '{a.registry}',
            'value.avro-confluent.subject' = '{a.sink_topic}-value',
            'value.fields-include' = 'ALL'{kafka_options}{registry_options}
        )""")
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE dead_letters (
            src_topic STRING,
            raw_value BYTES,
            reason STRING
        ) WITH (
            'connector' = 'kafka',
            'topic' = '{a.dlq_topic}',
            'properties.bootstrap.servers' = '{a.bootstrap}',
            'properties.transaction.timeout.ms' = '600000',
            'sink.delivery-guarantee' = 'exactly-once',
            'properties.max.request.size' = '{a.dlq_max_bytes}',
            'sink.transactional-id-prefix' = 'supplier-stats-dlq',
            'format' = 'json'{kafka_options}
        )""")
    t_env.create_temporary_view("stats", t_env.from_data_stream(stats))
    t_env.create_temporary_view("dead", t_env.from_data_stream(dead))
    statements = t_env.create_statement_set()
    statements.add_insert_sql("INSERT INTO supplier_stats_sink SELECT * FROM stats")
    statements.add_insert_sql(f"INSERT INTO dead_letters SELECT '{a.source_topic}', raw_value, reason FROM dead")
    statements.attach_as_datastream()
    env.execute("supplier-stats")


if __name__ == "__main__":
    main()
