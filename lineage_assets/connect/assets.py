"""Assets of the pipeline's source side: the orders table, the Kafka topic `orders` that orders-source fills,
and the archive that orders-s3-sink writes. Materializing one deploys (or updates) what produces it."""

import dagster as dg

from lineage_assets.connect.configs import config_version, render_connector
from lineage_assets.connect.incarnations import incarnations
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.freshness import streaming_output
from lineage_assets.kafka.registry import RegistryError, ensure_compatibility, subject_of
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import TopicSpec, ensure_topic
from lineage_assets.lineage.identity import DEAD_LETTER_RETENTION_MS, DEAD_LETTER_TOPICS, WEEK_MS, Pipeline
from lineage_assets.metadata import asset_key, identity_metadata
from lineage_assets.source import schema_guard
from lineage_assets.source.orders import ensure_table
from lineage_assets.source.resource import SourceDatabaseResource
from lineage_assets.storage import ObjectStoreResource
from lineage_assets.tunables import PipelineTunables

OWNERS = ["team:data-platform"]
ORDERS_TOPIC = TopicSpec("orders", partitions=3, retention_ms=WEEK_MS)
SOURCE_CONNECTOR = "orders-source"
SINK_CONNECTOR = "orders-s3-sink"
DLQ_TOPIC = TopicSpec(DEAD_LETTER_TOPICS[SINK_CONNECTOR], partitions=1, retention_ms=DEAD_LETTER_RETENTION_MS)


def build_connect_assets(pipeline: Pipeline, tunables: PipelineTunables) -> list[dg.AssetsDefinition]:
    table = pipeline.dataset("source_orders")
    topic = pipeline.dataset("kafka_orders")
    archive = pipeline.dataset("archive_orders")

    @dg.asset(
        key=asset_key(table),
        description=table.description,
        kinds={"postgres"},
        owners=OWNERS,
        group_name="source",
        metadata=identity_metadata(pipeline, table),
    )
    def orders_source_table(
        context: dg.AssetExecutionContext, source_db: SourceDatabaseResource
    ) -> dg.MaterializeResult:
        with source_db.connect() as conn:
            ensure_table(conn)
            (rows,) = conn.execute("SELECT count(*) FROM public.orders").fetchone()
        if source_db.admin_user:
            with source_db.connect(admin=True) as admin:
                guarded = schema_guard.install(admin, pipeline)
            guard = f"installed: dropping or retyping {', '.join(sorted(guarded))} is refused"
        else:
            guard = "not installed (no admin_user configured): incompatible changes to the table are not refused"
            context.log.warning(f"schema guard {guard}")
        return dg.MaterializeResult(metadata={"dagster/row_count": rows, "schema_guard": guard})

    @dg.asset(
        key=asset_key(topic),
        deps=[asset_key(table)],
        description=f"{topic.description}. Materializing creates the topic, holds its value subject to a "
        f"compatibility rule, and deploys the {SOURCE_CONNECTOR} connector (Debezium CDC of the orders table).",
        kinds={"kafka", "debezium"},
        owners=OWNERS,
        group_name="source",
        metadata={**identity_metadata(pipeline, topic), "partitions": ORDERS_TOPIC.partitions},
    )
    def kafka_orders(kafka: KafkaResource, connect: ConnectResource) -> dg.MaterializeResult:
        topic_outcome = ensure_topic(kafka.connection(), ORDERS_TOPIC)
        # before the connector registers a version: an incompatible table change is refused at the registry
        try:
            compatibility = ensure_compatibility(kafka.registry(), ORDERS_TOPIC.name)
        except RegistryError as exc:
            raise dg.Failure(str(exc)) from exc
        config = render_connector(SOURCE_CONNECTOR, connect)
        outcome = connect.client().deploy(SOURCE_CONNECTOR, config)
        return dg.MaterializeResult(
            metadata={
                **deployed_incarnation(kafka, connect, SOURCE_CONNECTOR),
                "topic": f"{ORDERS_TOPIC.name} ({topic_outcome})",
                "retention_ms": ORDERS_TOPIC.retention_ms,
                "schema_compatibility": f"{subject_of(ORDERS_TOPIC.name)}: {compatibility}",
                "connector": f"{SOURCE_CONNECTOR} ({outcome})",
                "config_version": config_version(config),
            }
        )

    @dg.asset(
        key=asset_key(archive),
        deps=[asset_key(topic)],
        description=f"{archive.description}. Materializing deploys the {SINK_CONNECTOR} connector; records it "
        f"cannot write go to topic {DLQ_TOPIC.name}.",
        kinds={"s3", "kafka"},
        owners=OWNERS,
        group_name="source",
        metadata=identity_metadata(pipeline, archive),
        freshness_policy=streaming_output(tunables.streaming_fresh_minutes),
    )
    def orders_archive(
        kafka: KafkaResource, connect: ConnectResource, object_store: ObjectStoreResource
    ) -> dg.MaterializeResult:
        ensure_topic(kafka.connection(), DLQ_TOPIC)
        bucket = connect.archive_bucket
        s3 = object_store.client()
        if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
            s3.create_bucket(Bucket=bucket)
        config = render_connector(SINK_CONNECTOR, connect)
        outcome = connect.client().deploy(SINK_CONNECTOR, config)
        return dg.MaterializeResult(
            metadata={
                **deployed_incarnation(kafka, connect, SINK_CONNECTOR),
                "connector": f"{SINK_CONNECTOR} ({outcome})",
                "config_version": config_version(config),
                "dead_letter_topic": DLQ_TOPIC.name,
            }
        )

    return [orders_source_table, kafka_orders, orders_archive]


def deployed_incarnation(kafka: KafkaResource, connect: ConnectResource, connector: str) -> dict[str, str]:
    """The incarnation of the connector as Connect recorded it (the connector sensor compares it with the one that
    runs, to tell this deployment from a connector created outside Dagster)."""
    incarnation = incarnations(kafka.connection(), connect.config_topic).get(connector)
    return {"connector_incarnation": incarnation.ref if incarnation else "unknown"}
