"""The iceberg-ingestion Flink job as the producer of asset iceberg/default/orders: materializing deploys it
idempotently (see deploy.py: a job of this version already running is adopted, whoever started it; one that does not
run starts from its newest state) and reports its OpenLineage run by manual orchestration (START and RUNNING once
Flink accepted the job, under the run id of that Flink job, FAIL if the submit fails); the Flink job sensor ends
the run."""

import datetime as dt

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.flink.client import FlinkError
from lineage_assets.flink.deploy import (
    JOBS_DIR,
    FlinkJobSpec,
    adopt,
    check_running,
    closer,
    deployed_by,
    ensure_dead_letter_topic,
    job_environment,
    order_rule_args,
    plan_start,
    require_source_topic,
    submit,
)
from lineage_assets.flink.runs import ENGINE, flink_run_id, open_events
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.freshness import streaming_output
from lineage_assets.kafka.topics import TopicSpec, has_committed_offsets
from lineage_assets.lineage.events import RunState, run_id_for
from lineage_assets.lineage.identity import DEAD_LETTER_RETENTION_MS, DEAD_LETTER_TOPICS, Pipeline
from lineage_assets.lineage.observed import observed_event_builder
from lineage_assets.metadata import asset_key, identity_metadata
from lineage_assets.resources import FlinkResource, IcebergResource, KafkaResource, LineageResource

JOB = "iceberg-ingestion"
#: the Kafka consumer group the job commits its offsets under (on each checkpoint)
CONSUMER_GROUP = JOB
SPEC = FlinkJobSpec(
    JOB,
    JOBS_DIR / "iceberg_ingestion.py",
    lost_without_state="the Iceberg commit of the last checkpoint, whose rows may then be written twice or never",
)
DLQ_TOPIC = TopicSpec(DEAD_LETTER_TOPICS[JOB], partitions=1, retention_ms=DEAD_LETTER_RETENTION_MS)


class IcebergIngestionConfig(dg.Config):
    checkpoint_interval: str = "10 s"  # Iceberg commits on checkpoints: this is the ingestion-to-queryable delay
    #: a savepoint to start from when the job does not run on this cluster, e.g. one taken on another cluster the job
    #: moves from (`flink stop` there); ignored while the job runs here (it keeps its own state)
    restore_from: str = ""
    #: start from the consumer group's committed offsets when no savepoint or retained checkpoint of the job is left
    #: (its state is lost; the deployment warns): never done unless asked
    start_from_offsets: bool = False


def build_iceberg_ingestion_asset(pipeline: Pipeline, settings: StackSettings) -> dg.AssetsDefinition:
    target = pipeline.dataset("iceberg_orders")
    job = pipeline.job(target.producer)

    @dg.asset(
        key=asset_key(target),
        deps=[asset_key(pipeline.dataset(k)) for k in job.inputs],
        description=f"{target.description}. Materializing deploys the Flink job `{job.name}` (Kafka orders -> "
        f"Iceberg; undecodable records to topic {DLQ_TOPIC.name}).",
        kinds={"flink", "iceberg"},
        owners=["team:data-platform"],
        group_name="streaming",
        metadata=identity_metadata(pipeline, target),
        freshness_policy=streaming_output(settings),
    )
    def iceberg_orders(
        context: dg.AssetExecutionContext,
        config: IcebergIngestionConfig,
        kafka: KafkaResource,
        iceberg: IcebergResource,
        lineage: LineageResource,
        flink: FlinkResource,
    ) -> dg.MaterializeResult:
        source = pipeline.dataset("kafka_orders")
        require_source_topic(kafka.connection(), source.name, asset_key(source).to_user_string())
        client = flink.client(settings)
        table_name = target.symlinks[0].name
        table, added = ensure_orders_table(iceberg.catalog(), table_name, target)
        if added:
            context.log.info(f"Iceberg table {table_name}: added declared columns {list(added)} (metadata only)")
        dlq_args = ensure_dead_letter_topic(kafka.connection(), source.name, DLQ_TOPIC)
        version = SPEC.version(f"{config.checkpoint_interval}|{' '.join([*order_rule_args(settings), *dlq_args])}")
        builder, _ = observed_event_builder(pipeline, kafka.registry())
        close_replaced = closer(job, builder, lineage.emitter(), deployed_by(context))
        adopted, savepoint = check_running(context, client, SPEC, version, config.restore_from, close_replaced)
        if adopted is not None:
            return adopt(adopted, job, builder, lineage.emitter())

        args = [
            *("--bootstrap", kafka.connection().bootstrap, "--registry", kafka.schema_registry_url),
            *("--catalog-uri", iceberg.uri, "--s3-endpoint", iceberg.s3_endpoint, "--region", iceberg.region),
            *("--table", table_name, "--dlq-topic", DLQ_TOPIC.name, "--group-id", CONSUMER_GROUP),
            *("--checkpoint-interval", config.checkpoint_interval),
            *order_rule_args(settings),
            *dlq_args,
        ]
        if client.checkpoint_dir(JOB):
            args += ["--checkpoint-dir", client.checkpoint_dir(JOB)]
        if savepoint:
            how = f"started from {savepoint}"
        else:
            committed = has_committed_offsets(kafka.connection(), source.name, CONSUMER_GROUP)
            start = plan_start(context, client, SPEC, args, committed, config.start_from_offsets)
            savepoint, how = start.savepoint, start.how
        emitter = lineage.emitter()
        dagster_run = deployed_by(context)
        started_by = f"Dagster run {context.run.run_id}"
        try:
            flink_job = submit(client, SPEC, args, version, savepoint, env=job_environment(kafka, iceberg))
        except FlinkError as exc:
            run_id = run_id_for(JOB, dt.datetime.now(dt.UTC), context.run.run_id)
            emitter.emit(builder.event(JOB, RunState.FAIL, run_id, dagster_run=dagster_run, engine=ENGINE, error=exc))
            raise dg.Failure(f"deploying the Flink job {JOB} failed: {exc}") from exc
        run_id = flink_run_id(job, flink_job.jid, flink_job.start_time_ms)
        for event in open_events(JOB, run_id, flink_job, version, started_by, builder, dagster_run=dagster_run):
            emitter.emit(event)
        snapshot = table.current_snapshot()
        return dg.MaterializeResult(
            metadata={
                "flink_job_id": flink_job.jid,
                "state": flink_job.state,
                "flink_version": version,
                "started_by": started_by,
                "deployment": how,
                "openlineage/run_id": run_id,
                "iceberg/snapshot_id": str(snapshot.snapshot_id) if snapshot else "none yet",
                "iceberg/schema_id": table.schema().schema_id,
                "dagster/uri": table.location(),
                "dead_letter_topic": DLQ_TOPIC.name,
            }
        )

    return iceberg_orders
