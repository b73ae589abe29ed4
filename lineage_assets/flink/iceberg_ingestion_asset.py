"""The iceberg-ingestion Flink job as the producer of asset iceberg/default/orders: materializing deploys it
idempotently (see deploy.py: a job of this version already running is adopted, whoever started it; one that does not
run starts from its newest state) and reports its OpenLineage run by manual orchestration (START and RUNNING once
Flink accepted the job, under the run id of that Flink job, FAIL if the submit fails); the Flink job sensor ends
the run."""

import dagster as dg

from lineage_assets.flink.deploy import JOBS_DIR, Deploying, FlinkDeployment, FlinkJobSpec, Prepared, deploy_asset
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import TopicSpec
from lineage_assets.lineage.identity import CONSUMER_GROUPS, DEAD_LETTER_RETENTION_MS, DEAD_LETTER_TOPICS, Pipeline
from lineage_assets.storage import IcebergResource
from lineage_assets.tunables import PipelineTunables

JOB = "iceberg-ingestion"
CONSUMER_GROUP = CONSUMER_GROUPS[JOB]
SPEC = FlinkJobSpec(
    JOB,
    JOBS_DIR / "iceberg_ingestion_job.py",
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


def job_args(
    kafka: KafkaResource,
    iceberg: IcebergResource,
    table_name: str,
    checkpoint_interval: str,
    job_name: str = JOB,
    group: str = CONSUMER_GROUP,
    dlq_topic: str = DLQ_TOPIC.name,
) -> tuple[str, ...]:
    """The job's arguments but the order rule's and the dead letters' size: where it reads, writes and commits (a
    second deployment beside this one gives its own name, group, table and dead-letter topic)."""
    return (
        *("--bootstrap", kafka.connection().bootstrap, "--registry", kafka.schema_registry_url),
        *("--catalog-uri", iceberg.uri, "--s3-endpoint", iceberg.s3_endpoint, "--region", iceberg.region),
        *("--catalog-connect-timeout-ms", str(int(iceberg.connect_timeout_s * 1000))),
        *("--catalog-read-timeout-ms", str(int(iceberg.read_timeout_s * 1000))),
        *("--table", table_name, "--dlq-topic", dlq_topic, "--group-id", group, "--job-name", job_name),
        *("--checkpoint-interval", checkpoint_interval),
    )


def prepare(run: Deploying) -> Prepared:
    """Create the table (or add the declared columns it lacks), then the dead-letter topic."""
    config, kafka, iceberg = run.config, run.resources.kafka, run.resources.iceberg
    table_name = run.target.table_name
    table, added = ensure_orders_table(iceberg.catalog(), table_name, run.target)
    if added:
        run.context.log.info(f"Iceberg table {table_name}: added declared columns {list(added)} (metadata only)")
    dead_letter_args = run.dead_letter_args()
    args = job_args(kafka, iceberg, table_name, config.checkpoint_interval)

    def report() -> dict[str, object]:
        snapshot = table.current_snapshot()
        return {
            "iceberg/snapshot_id": str(snapshot.snapshot_id) if snapshot else "none yet",
            "iceberg/schema_id": table.schema().schema_id,
            "dagster/uri": table.location(),
        }

    return Prepared((config.checkpoint_interval,), args, tuple(dead_letter_args), report)


DEPLOYMENT = FlinkDeployment(
    SPEC,
    "iceberg_orders",
    CONSUMER_GROUP,
    DLQ_TOPIC,
    IcebergIngestionConfig,
    about="Kafka orders -> Iceberg; undecodable records",
    kinds=frozenset({"flink", "iceberg"}),
    resources=frozenset({"kafka", "iceberg", "lineage", "flink"}),
    prepare=prepare,
)


def build_iceberg_ingestion_asset(pipeline: Pipeline, tunables: PipelineTunables) -> dg.AssetsDefinition:
    return deploy_asset(pipeline, tunables, DEPLOYMENT)
