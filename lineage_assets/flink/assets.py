"""The iceberg-ingestion Flink job as the producer of asset iceberg/default/orders: materializing deploys it
idempotently (submits if not running, never a second copy, a changed job redeploys from a savepoint) and reports
its OpenLineage run by manual orchestration (START before submit, RUNNING after, FAIL if the submit fails)."""

import datetime as dt
import hashlib

import dagster as dg

from infra.settings import REPO_ROOT, StackSettings
from lineage_assets.flink.client import FlinkClient, FlinkError
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.kafka.topics import TopicSpec, ensure_topic
from lineage_assets.lineage.events import Engine, EventBuilder, ParentRun, RunState, run_id_for
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key, identity_metadata
from lineage_assets.resources import IcebergResource, KafkaResource, LineageResource

JOB = "iceberg-ingestion"
SCRIPT = REPO_ROOT / "flink_jobs" / "iceberg_ingestion.py"
DLQ_TOPIC = TopicSpec("orders-dlq-flink", partitions=1, retention_ms=28 * 24 * 3600 * 1000)
ENGINE = Engine("flink", "2.0.0")


class IcebergIngestionConfig(dg.Config):
    checkpoint_interval: str = "10 s"  # Iceberg commits on checkpoints: this is the ingestion-to-queryable delay


def job_version(checkpoint_interval: str) -> str:
    """What a deployment is: the job's code and its settings. A change redeploys from a savepoint."""
    return hashlib.sha256(SCRIPT.read_bytes() + checkpoint_interval.encode()).hexdigest()[:12]


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
    )
    def iceberg_orders(
        context: dg.AssetExecutionContext,
        config: IcebergIngestionConfig,
        kafka: KafkaResource,
        iceberg: IcebergResource,
        lineage: LineageResource,
    ) -> dg.MaterializeResult:
        client = FlinkClient(settings)
        table_name = target.symlinks[0].name
        table = ensure_orders_table(iceberg.catalog(), table_name)
        ensure_topic(kafka.bootstrap_servers, DLQ_TOPIC)
        version = job_version(config.checkpoint_interval)
        running = client.active(JOB)
        savepoint = None
        if running is not None:
            deployed = client.user_config(running.jid).get("lineage-lab.version")
            if deployed == version:
                # same deployment: carry the open run over, so the job sensor can close it later
                previous = context.instance.get_latest_materialization_event(context.asset_key)
                pmeta = previous.asset_materialization.metadata if previous and previous.asset_materialization else {}
                carried = (
                    {"openlineage/run_id": pmeta["openlineage/run_id"].value} if "openlineage/run_id" in pmeta else {}
                )
                return dg.MaterializeResult(
                    metadata={"flink_job_id": running.jid, "deployment": f"unchanged ({version})", **carried}
                )
            savepoint = client.stop_with_savepoint(running.jid)
            context.log.info(f"stopped {running.jid} (version {deployed}) with savepoint {savepoint}")

        emitter = lineage.emitter()
        builder = EventBuilder(pipeline)
        started = dt.datetime.now(dt.UTC)
        run_id = run_id_for(JOB, started, context.run_id)
        parent = ParentRun(context.run_id, settings.openlineage_namespace, f"dagster.{context.job_name}")
        emitter.emit(builder.event(JOB, RunState.START, run_id, event_time=started, parent=parent, engine=ENGINE))
        args = [
            "--bootstrap",
            kafka.bootstrap_servers,
            "--registry",
            kafka.schema_registry_url,
            "--catalog-uri",
            iceberg.uri,
            "--s3-endpoint",
            iceberg.s3_endpoint,
            "--s3-access-key",
            iceberg.access_key_id,
            "--s3-secret-key",
            iceberg.secret_access_key,
            "--region",
            iceberg.region,
            "--table",
            table_name,
            "--dlq-topic",
            DLQ_TOPIC.name,
            "--checkpoint-interval",
            config.checkpoint_interval,
            "--version",
            version,
        ]
        try:
            jid = client.submit_python(str(SCRIPT), *args, savepoint=savepoint)
        except FlinkError as exc:
            emitter.emit(builder.event(JOB, RunState.FAIL, run_id, parent=parent, engine=ENGINE, error=exc))
            raise dg.Failure(f"deploying the Flink job {JOB} failed: {exc}") from exc
        emitter.emit(builder.event(JOB, RunState.RUNNING, run_id, parent=parent, engine=ENGINE))
        snapshot = table.current_snapshot()
        return dg.MaterializeResult(
            metadata={
                "flink_job_id": jid,
                "deployment": f"{'redeployed from ' + savepoint if savepoint else 'submitted'} ({version})",
                "openlineage/run_id": run_id,
                "iceberg/snapshot_id": str(snapshot.snapshot_id) if snapshot else "none yet",
                "dagster/uri": table.location(),
                "dead_letter_topic": DLQ_TOPIC.name,
            }
        )

    return iceberg_orders
