"""supplier-stats (DataStream API): Kafka `orders` -> per-supplier 5 s tumbling windows -> Kafka `supplier-stats`.

The reference lab's windowing: event time from bid_time, bounded out-of-orderness 5 s, idleness 60 s, keyed by
supplier, tumbling 5 s windows, allowed lateness 5 s, sum of price (as double, 2 places) and count. Unlike the
reference, a quiet stream still closes its windows: a partition without a valid order for --quiet-advance-ms
(default 10 s) of processing time advances its watermark at the rate processing time passes until it goes idle, so a
window comes out within window + out-of-orderness + that setting even when no later order arrives. It also
checkpoints (exactly-once: source offsets in the checkpoint, Kafka transactions on both outputs) and
loses nothing: records that are not valid orders and orders later than the allowed lateness go to the dead-letter
topic with the reason. decodable-in = counted in windows + dead-lettered.

This script defines, configures and submits the job; every record is handled in the JVM by the order-functions
module (flink_jobs/order-functions, shipped with the job): the Kafka source's deserializer decodes each value into
an order or a reason, the watermark strategy runs inside the source (one generator per partition, valid orders
only, so a bad or implausible order never moves the clock), and the windows are Flink's own operators.

Outputs go through Flink's Kafka table connector, the one PyFlink sink that writes a key column and registers the
Avro value schema (`supplier-stats-value`) itself. Every window it writes carries the Kafka header
`lineage-lab-writer: supplier-stats` (the sink's writable `headers` metadata column, not part of the value schema):
a consumer cannot see a record's producer, so the conservation check (lineage_assets/conservation/
supplier_windows.py) tells the job's windows from records another producer put into the topic by that header.
"""

from __future__ import annotations

import argparse
import sys

import connections
import deployment
from pyflink.common import WatermarkStrategy
from pyflink.common.serialization import DeserializationSchema
from pyflink.datastream import CheckpointingMode, DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.kafka import KafkaOffsetResetStrategy, KafkaOffsetsInitializer, KafkaSource
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment

WINDOW_MS = 5_000
OUT_OF_ORDERNESS_MS = 5_000
IDLENESS_MS = 60_000
ALLOWED_LATENESS_MS = 5_000
#: the Kafka header (and its value) on every window this job writes, so that other producers' records can be told apart
WRITER_HEADER = "lineage-lab-writer"
WRITER = "supplier-stats"
DEAD_LETTER_COLUMNS = ("src_topic STRING", "raw_value BYTES", "reason STRING")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--registry", default="http://127.0.0.1:8085/apis/ccompat/v7")
    p.add_argument("--source-topic", default="orders")
    p.add_argument("--parallelism", type=int, default=1, help="of every operator (watermarks are per partition)")
    p.add_argument("--sink-topic", default="supplier-stats")
    p.add_argument("--dlq-topic", default="orders-dlq-supplier-stats")
    p.add_argument("--group-id", default="supplier-stats")
    p.add_argument("--checkpoint-interval-ms", type=int, default=10_000)
    p.add_argument("--dlq-max-bytes", type=int, default=4 * 1024 * 1024, help="largest dead letter the job sends")
    p.add_argument("--max-future-s", type=int, required=True, help="plausibility window ahead of processing time")
    p.add_argument("--max-past-s", type=int, required=True, help="plausibility window behind processing time")
    p.add_argument("--version", default="dev", help="deployment version, readable in the job's config over REST")
    p.add_argument("--checkpoint-dir", default="", help="where checkpoints are retained (empty: the cluster's)")
    p.add_argument(
        "--quiet-advance-ms",
        type=int,
        default=10_000,
        help="processing time without a valid order after which a partition's watermark advances with it",
    )
    a, _ = p.parse_known_args()
    if not 0 <= a.quiet_advance_ms <= IDLENESS_MS - OUT_OF_ORDERNESS_MS - WINDOW_MS:
        # the advance must close the windows of a partition's newest orders before the partition goes idle
        p.error(
            f"--quiet-advance-ms must be 0 to {IDLENESS_MS - OUT_OF_ORDERNESS_MS - WINDOW_MS} (idleness - "
            f"out-of-orderness - window), got {a.quiet_advance_ms}"
        )

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(a.parallelism)
    env.get_config().enable_object_reuse()  # the JVM functions never keep a record they handed on
    env.enable_checkpointing(a.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    env.get_config().set_global_job_parameters(deployment.job_parameters(a.version, sys.argv[1:]))
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set("pipeline.name", "supplier-stats")
    t_env.get_config().set("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    if a.checkpoint_dir:
        t_env.get_config().set("execution.checkpointing.dir", a.checkpoint_dir)

    orders = get_gateway().jvm.lab.lineage.orders  # the order-functions module
    decode = orders.DecodeSettings(a.registry, connections.registry_user_info(), a.max_future_s, a.max_past_s)
    builder = KafkaSource.builder()
    for key, value in connections.kafka_properties().items():  # a secured cluster's client settings
        builder = builder.set_property(key, value)
    source = (
        builder.set_bootstrap_servers(a.bootstrap)
        .set_topics(a.source_topic)
        .set_group_id(a.group_id)
        .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST))
        .set_value_only_deserializer(DeserializationSchema(orders.flink.OrderDeserializationSchema(decode)))
        .set_property("isolation.level", "read_committed")
        .set_property("commit.offsets.on.checkpoint", "true")
        .build()
    )
    watermarks = WatermarkStrategy(
        orders.flink.OrderWatermarks.strategy(OUT_OF_ORDERNESS_MS, IDLENESS_MS, a.quiet_advance_ms)
    )
    decoded = env.from_source(source, watermarks, "orders").uid("orders-source")
    topology = orders.flink.SupplierStatsTopology.build(
        decoded._j_data_stream, WINDOW_MS, OUT_OF_ORDERNESS_MS, ALLOWED_LATENESS_MS
    )
    stats, dead = DataStream(topology.stats()), DataStream(topology.deadLetters())

    kafka_options = connections.kafka_sql_options()
    registry_options = connections.registry_sql_options("value.avro-confluent")
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE supplier_stats_sink (
            window_start STRING NOT NULL,
            window_end STRING NOT NULL,
            supplier STRING NOT NULL,
            total_price DOUBLE NOT NULL,
            `count` BIGINT NOT NULL,
            headers MAP<STRING, BYTES> METADATA
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
    t_env.execute_sql(
        connections.dead_letter_table(
            "dead_letters", DEAD_LETTER_COLUMNS, a.dlq_topic, a.bootstrap, a.dlq_max_bytes, "supplier-stats-dlq"
        )
    )
    t_env.create_temporary_view("stats", t_env.from_data_stream(stats))
    t_env.create_temporary_view("dead", t_env.from_data_stream(dead))
    statements = t_env.create_statement_set()
    statements.add_insert_sql(
        "INSERT INTO supplier_stats_sink SELECT window_start, window_end, supplier, total_price, `count`, "
        f"MAP['{WRITER_HEADER}', CAST('{WRITER}' AS BYTES)] FROM stats"
    )
    statements.add_insert_sql(f"INSERT INTO dead_letters SELECT '{a.source_topic}', raw_value, reason FROM dead")
    statements.attach_as_datastream()
    env.execute("supplier-stats")


if __name__ == "__main__":
    main()
