"""The supplier-stats Flink job (DataStream API) as the producer of asset kafka/supplier_stats: materializing
deploys it idempotently (see deploy.py) with one subtask per partition of `orders`.

Lineage follows the "listener" pattern: the OpenLineage Flink listener sends the job's START (with its Kafka
datasets) while the job is submitted; that event goes into the outbox as it is, and a RUNNING event for the same
run adds what the listener cannot know: schemas, column lineage, dataSource and the Dagster run as parent. The
listener never ends the run in a session cluster, so the Flink job sensor does.
"""

import dagster as dg

from lineage_assets.flink.deploy import JOBS_DIR, Deploying, FlinkDeployment, FlinkJobSpec, Prepared, deploy_asset
from lineage_assets.kafka.registry import RegistryError, ensure_compatibility, subject_of
from lineage_assets.kafka.topics import TopicSpec, ensure_topic
from lineage_assets.lineage.identity import (
    CONSUMER_GROUPS,
    DEAD_LETTER_RETENTION_MS,
    DEAD_LETTER_TOPICS,
    WEEK_MS,
    Pipeline,
)
from lineage_assets.tunables import PipelineTunables

JOB = "supplier-stats"
SPEC = FlinkJobSpec(
    JOB,
    JOBS_DIR / "supplier_stats_job.py",
    lost_without_state="the windows open when the job stopped: their orders are then counted in no window",
)
DLQ_TOPIC = TopicSpec(DEAD_LETTER_TOPICS[JOB], partitions=1, retention_ms=DEAD_LETTER_RETENTION_MS)
CONSUMER_GROUP = CONSUMER_GROUPS[JOB]


class SupplierStatsConfig(dg.Config):
    checkpoint_interval_ms: int = 10_000  # output is transactional: windows become readable at each checkpoint
    #: processing time a partition of the source topic may go without a valid order before its event-time clock
    #: advances with processing time (so a window comes out within window + out-of-orderness + this, plus a
    #: checkpoint, even when no later order arrives); 0 to 50,000 (the job's idleness - out-of-orderness - window)
    quiet_advance_ms: int = 10_000
    #: subtasks of every operator; event time is kept per partition inside the source whatever this is, so more
    #: only pays when there are more cores than the 2 of the embedded stack's machine
    parallelism: int = 1
    #: a savepoint to start from when the job does not run on this cluster, e.g. one taken on another cluster the job
    #: moves from (`flink stop` there); ignored while the job runs here (it keeps its own state)
    restore_from: str = ""
    #: start from the consumer group's committed offsets when no savepoint or retained checkpoint of the job is left
    #: (its open windows are lost; the deployment warns): never done unless asked
    start_from_offsets: bool = False


def prepare(run: Deploying) -> Prepared:
    """Create the output topic and the dead-letter topic, and make the output's subject accept the job's schema."""
    config, kafka = run.config, run.resources.kafka
    output_topic = TopicSpec(run.target.name, partitions=3, retention_ms=WEEK_MS)
    ensure_topic(kafka.connection(), output_topic)
    dead_letter_args = run.dead_letter_args()
    try:
        compatibility = ensure_compatibility(kafka.registry(), output_topic.name)
    except RegistryError as exc:
        raise dg.Failure(str(exc)) from exc
    if config.parallelism < 1:
        raise dg.Failure(f"parallelism must be 1 or more, got {config.parallelism}")
    args = (
        *("--bootstrap", kafka.connection().bootstrap, "--registry", kafka.schema_registry_url),
        *("--source-topic", run.source_topic, "--parallelism", str(config.parallelism)),
        *("--sink-topic", output_topic.name, "--dlq-topic", DLQ_TOPIC.name, "--group-id", CONSUMER_GROUP),
        *("--checkpoint-interval-ms", str(config.checkpoint_interval_ms)),
        *("--quiet-advance-ms", str(config.quiet_advance_ms)),
    )
    version_parts = (str(config.checkpoint_interval_ms), str(config.parallelism), str(config.quiet_advance_ms))
    metadata = {
        "parallelism": config.parallelism,
        "schema_compatibility": f"{subject_of(output_topic.name)}: {compatibility}",
    }
    return Prepared(version_parts, args, tuple(dead_letter_args), lambda: metadata)


DEPLOYMENT = FlinkDeployment(
    SPEC,
    "kafka_supplier_stats",
    CONSUMER_GROUP,
    DLQ_TOPIC,
    SupplierStatsConfig,
    about="DataStream API; late or undecodable orders",
    kinds=frozenset({"flink", "kafka"}),
    resources=frozenset({"kafka", "lineage", "flink"}),
    prepare=prepare,
    listener=True,
)


def build_supplier_stats_stream_asset(pipeline: Pipeline, tunables: PipelineTunables) -> dg.AssetsDefinition:
    return deploy_asset(pipeline, tunables, DEPLOYMENT)
