"""iceberg-ingestion: Kafka `orders` (Confluent-wire Avro) -> Iceberg `default.orders`, bad records -> Kafka DLQ.

The value is read as raw BYTES (never with 'avro-confluent', which fails the job on a poison record) and decoded
by the JVM table function `decode_order` of the order-functions module (flink_jobs/order-functions, shipped with
the job; the one valid-order rule is in there): one output row per input record, either a good order or an error
reason. This script only defines, configures and submits the job. A statement
set writes good rows to Iceberg (commits on checkpoints, exactly-once) and bad rows, with the raw bytes, key,
partition and offset, to the DLQ topic (Kafka transactions, exactly-once). decodable-in = out + dead-lettered.

Configuration (job arguments, all optional): --bootstrap, --registry (ccompat base URL), --catalog-uri,
--s3-endpoint, --region, --catalog-connect-timeout-ms, --catalog-read-timeout-ms, --checkpoint-interval,
--source-topic, --dlq-topic, --group-id, --table, --job-name (a second deployment beside the first needs its own
name, group, table and dead-letter topic). Credentials of secured clusters come from the environment
(flink_jobs/connections.py).
"""

from __future__ import annotations

import argparse
import json
import sys

import connections
import deployment
from pyflink.java_gateway import get_gateway
from pyflink.table import EnvironmentSettings, TableEnvironment

ROW_FIELDS = ["order_id", "supplier", "item", "price", "bid_time", "currency", "error"]
#: the table's columns this job writes, in the order of the SELECT below
TABLE_COLUMNS = ["order_id", "item", "price", "supplier", "bid_time", "currency"]
DEAD_LETTER_COLUMNS = (
    "src_topic STRING",
    "src_partition INT",
    "src_offset BIGINT",
    "src_timestamp TIMESTAMP_LTZ(3)",
    "record_key STRING",
    "raw_value BYTES",
    "reason STRING",
)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--registry", default="http://127.0.0.1:8085/apis/ccompat/v7")
    p.add_argument("--catalog-uri", default="http://127.0.0.1:8181")
    p.add_argument("--s3-endpoint", default="http://127.0.0.1:9000")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--catalog-connect-timeout-ms", type=int, default=5000, help="catalog and S3: connect limit")
    p.add_argument("--catalog-read-timeout-ms", type=int, default=30000, help="catalog and S3: limit per answer")
    p.add_argument("--checkpoint-interval", default="10 s")
    p.add_argument("--source-topic", default="orders")
    p.add_argument("--dlq-topic", default="orders-dlq-flink")
    p.add_argument("--group-id", default="iceberg-ingestion")
    p.add_argument("--table", default="default.orders")
    p.add_argument("--job-name", default="iceberg-ingestion", help="Flink's name of the job (its lineage job name)")
    p.add_argument("--dlq-max-bytes", type=int, default=4 * 1024 * 1024, help="largest dead letter the job sends")
    p.add_argument("--max-future-s", type=int, required=True, help="plausibility window ahead of processing time")
    p.add_argument("--max-past-s", type=int, required=True, help="plausibility window behind processing time")
    p.add_argument("--version", default="dev", help="deployment version, readable in the job's config over REST")
    p.add_argument("--checkpoint-dir", default="", help="where checkpoints are retained (empty: the cluster's)")
    a, _ = p.parse_known_args()

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = t_env.get_config()
    conf.set("pipeline.name", a.job_name)
    conf.set("execution.checkpointing.interval", a.checkpoint_interval)
    conf.set("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    conf.set("table.local-time-zone", "UTC")
    conf.set("pipeline.object-reuse", "true")  # the JVM table function builds a new row per record
    if a.checkpoint_dir:
        conf.set("execution.checkpointing.dir", a.checkpoint_dir)

    orders = get_gateway().jvm.lab.lineage.orders  # the order-functions module
    decode = orders.DecodeSettings(a.registry, connections.registry_user_info(), a.max_future_s, a.max_past_s)
    # registered as an instance: its settings (registry credentials among them) travel inside the function, never
    # in the job's visible configuration
    decode_order = orders.flink.DecodeOrderFunction(decode)
    t_env._j_tenv.createTemporarySystemFunction("decode_order", decode_order)

    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE orders_raw (
            k STRING,
            v BYTES,
            src_partition INT METADATA FROM 'partition' VIRTUAL,
            src_offset BIGINT METADATA FROM 'offset' VIRTUAL,
            src_timestamp TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL
        ) WITH (
            'connector' = 'kafka',
            'topic' = '{a.source_topic}',
            'properties.bootstrap.servers' = '{a.bootstrap}',
            'properties.group.id' = '{a.group_id}',
            'properties.auto.offset.reset' = 'earliest',
            'properties.isolation.level' = 'read_committed',
            'scan.startup.mode' = 'group-offsets',
            'key.format' = 'raw',
            'key.fields' = 'k',
            'value.format' = 'raw',
            'value.fields-include' = 'EXCEPT_KEY'{connections.kafka_sql_options()}
        )""")

    t_env.execute_sql(
        connections.dead_letter_table(
            "orders_dlq",
            DEAD_LETTER_COLUMNS,
            a.dlq_topic,
            a.bootstrap,
            a.dlq_max_bytes,
            f"{a.job_name}-dlq",  # transactional ids: two jobs sharing a prefix would fence each other
        )
    )

    limits = connections.timeout_sql_options(a.catalog_connect_timeout_ms, a.catalog_read_timeout_ms)
    t_env.execute_sql(f"""
        CREATE CATALOG lakehouse WITH (
            'type' = 'iceberg',
            'catalog-type' = 'rest',
            'uri' = '{a.catalog_uri}',
            'io-impl' = 'org.apache.iceberg.aws.s3.S3FileIO',
            's3.endpoint' = '{a.s3_endpoint}',
            's3.path-style-access' = 'true',
            'client.region' = '{a.region}'{connections.s3_sql_options()}{connections.catalog_sql_options()}{limits}
        )""")

    ns, tbl = a.table.split(".")
    t_env.execute_sql(f"""
        CREATE TEMPORARY VIEW decoded AS
        SELECT r.k, r.v, r.src_partition, r.src_offset, r.src_timestamp, d.*
        FROM orders_raw AS r,
             LATERAL TABLE(decode_order(r.v)) AS d({", ".join(ROW_FIELDS)})""")

    stmts = t_env.create_statement_set()
    stmts.add_insert_sql(f"""
        INSERT INTO lakehouse.`{ns}`.`{tbl}` ({", ".join(TABLE_COLUMNS)})
        SELECT order_id, item, price, supplier, CAST(bid_time AS TIMESTAMP(6)), currency
        FROM decoded WHERE error IS NULL""")
    stmts.add_insert_sql(f"""
        INSERT INTO orders_dlq
        SELECT '{a.source_topic}', src_partition, src_offset, src_timestamp, k, v, error
        FROM decoded WHERE error IS NOT NULL""")
    parameters = deployment.job_parameters(a.version, sys.argv[1:])
    parameters |= plan_lineage(orders, t_env, stmts, {"decode_order": decode_order}, {"lakehouse": a.catalog_uri})
    conf.set("pipeline.global-job-parameters", deployment.as_config_map(parameters))
    stmts.execute()


def plan_lineage(orders, t_env, stmts, functions: dict, catalogs: dict[str, str]) -> dict[str, str]:
    """The job's column lineage from its compiled plan (PlanLineage of the order-functions module), as a global
    job parameter: the job carries its own account, readable over REST by whoever looks. ``functions``: the table
    functions that say which field of their input each output field is; ``catalogs``: each catalog's URI, so a
    catalog table is named after the catalog that holds it. A plan that cannot be read never stops the job: the
    reason is recorded instead, and the job's column lineage is then reported unknown."""
    try:
        java_functions = get_gateway().jvm.java.util.HashMap()
        for name, function in functions.items():
            java_functions.put(name, function)
        compiled = orders.lineage.PlanLineage.ofStatementSet(t_env._j_tenv, stmts._j_statement_set, java_functions)
        plan = json.loads(compiled)
    except Exception as exc:  # py4j raises its own and the JVM's errors alike
        return {deployment.LINEAGE_ERROR: deployment.encode_json(f"{type(exc).__name__}: {exc}"[:800])}
    plan["catalogs"] = {name: {"type": "iceberg", "uri": uri} for name, uri in catalogs.items()}
    return {deployment.LINEAGE: deployment.encode_json(plan)}


if __name__ == "__main__":
    main()
