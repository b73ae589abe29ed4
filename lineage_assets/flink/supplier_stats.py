"""The supplier-stats Flink job (DataStream API) as the producer of asset kafka/supplier_stats: materializing
deploys it idempotently (see deploy.py) with one subtask per partition of `orders`.

Lineage follows the "listener" pattern: the OpenLineage Flink listener sends the job's START (with its Kafka
datasets) while the job is submitted; that event goes into the outbox as it is, and a RUNNING event for the same
run adds what the listener cannot know: schemas, column lineage, dataSource and the Dagster run as parent. The
listener never ends the run in a session cluster, so the Flink job sensor does.
"""

import datetime as dt

import dagster as dg

from infra.services.flink import openlineage_events_file
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
from lineage_assets.flink.listener import ListenerLog, with_declared_datasets
from lineage_assets.flink.runs import ENGINE, deployment_facets, flink_run_id, open_events
from lineage_assets.freshness import streaming_output
from lineage_assets.kafka.registry import RegistryError, ensure_compatibility, subject_of
from lineage_assets.kafka.topics import TopicSpec, ensure_topic, has_committed_offsets
from lineage_assets.lineage.events import RunState, run_id_for
from lineage_assets.lineage.identity import DEAD_LETTER_RETENTION_MS, DEAD_LETTER_TOPICS, WEEK_MS, Pipeline
from lineage_assets.lineage.observed import observed_event_builder
from lineage_assets.metadata import asset_key, identity_metadata
from lineage_assets.resources import FlinkResource, KafkaResource, LineageResource

JOB = "supplier-stats"
SPEC = FlinkJobSpec(
    JOB,
    JOBS_DIR / "supplier_stats.py",
    lost_without_state="the windows open when the job stopped: their orders are then counted in no window",
)
DLQ_TOPIC = TopicSpec(DEAD_LETTER_TOPICS[JOB], partitions=1, retention_ms=DEAD_LETTER_RETENTION_MS)
CONSUMER_GROUP = "supplier-stats"


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


def build_supplier_stats_stream_asset(pipeline: Pipeline, settings: StackSettings) -> dg.AssetsDefinition:
    target = pipeline.dataset("kafka_supplier_stats")
    job = pipeline.job(target.producer)
    (source_key,) = job.inputs
    source_topic = pipeline.dataset(source_key).name
    output_topic = TopicSpec(target.name, partitions=3, retention_ms=WEEK_MS)

    @dg.asset(
        key=asset_key(target),
        deps=[asset_key(pipeline.dataset(k)) for k in job.inputs],
        description=f"{target.description}. Materializing deploys the Flink job `{job.name}` (DataStream API; "
        f"late or undecodable orders to topic {DLQ_TOPIC.name}).",
        kinds={"flink", "kafka"},
        owners=["team:data-platform"],
        group_name="streaming",
        metadata=identity_metadata(pipeline, target),
        freshness_policy=streaming_output(settings),
    )
    def kafka_supplier_stats(
        context: dg.AssetExecutionContext,
        config: SupplierStatsConfig,
        kafka: KafkaResource,
        lineage: LineageResource,
        flink: FlinkResource,
    ) -> dg.MaterializeResult:
        require_source_topic(kafka.connection(), source_topic, asset_key(pipeline.dataset(source_key)).to_user_string())
        ensure_topic(kafka.connection(), output_topic)
        dlq_args = ensure_dead_letter_topic(kafka.connection(), source_topic, DLQ_TOPIC)
        try:
            compatibility = ensure_compatibility(kafka.registry(), output_topic.name)
        except RegistryError as exc:
            raise dg.Failure(str(exc)) from exc
        client = flink.client(settings)
        settings_text = " ".join([*order_rule_args(settings), *dlq_args])
        if config.parallelism < 1:
            raise dg.Failure(f"parallelism must be 1 or more, got {config.parallelism}")
        version = SPEC.version(
            f"{config.checkpoint_interval_ms}|{config.parallelism}|{config.quiet_advance_ms}|{settings_text}"
        )
        builder, _ = observed_event_builder(pipeline, kafka.registry())
        close_replaced = closer(job, builder, lineage.emitter(), deployed_by(context))
        adopted, savepoint = check_running(context, client, SPEC, version, config.restore_from, close_replaced)
        if adopted is not None:
            return adopt(adopted, job, builder, lineage.emitter())

        emitter = lineage.emitter()
        dagster_run = deployed_by(context)
        started_by = f"Dagster run {context.run.run_id}"
        listener = ListenerLog(openlineage_events_file(settings))
        mark = listener.mark()
        args = [
            *("--bootstrap", kafka.connection().bootstrap, "--registry", kafka.schema_registry_url),
            *("--source-topic", source_topic, "--parallelism", str(config.parallelism)),
            *("--sink-topic", output_topic.name, "--dlq-topic", DLQ_TOPIC.name, "--group-id", CONSUMER_GROUP),
            *("--checkpoint-interval-ms", str(config.checkpoint_interval_ms)),
            *("--quiet-advance-ms", str(config.quiet_advance_ms)),
            *order_rule_args(settings),
            *dlq_args,
        ]
        if client.checkpoint_dir(JOB):
            args += ["--checkpoint-dir", client.checkpoint_dir(JOB)]
        if savepoint:
            how = f"started from {savepoint}"
        else:
            committed = has_committed_offsets(kafka.connection(), source_topic, CONSUMER_GROUP)
            start = plan_start(context, client, SPEC, args, committed, config.start_from_offsets)
            savepoint, how = start.savepoint, start.how
        try:
            flink_job = submit(client, SPEC, args, version, savepoint, env=job_environment(kafka))
        except FlinkError as exc:
            run_id = run_id_for(JOB, dt.datetime.now(dt.UTC), context.run.run_id)
            emitter.emit(builder.event(JOB, RunState.FAIL, run_id, dagster_run=dagster_run, engine=ENGINE, error=exc))
            raise dg.Failure(f"deploying the Flink job {JOB} failed: {exc}") from exc

        jid = flink_job.jid
        run_id = flink_run_id(job, jid, flink_job.start_time_ms)
        from_listener = listener.events_for(jid, since=mark, wait_seconds=10)
        starts = [e for e in from_listener if e.get("eventType") == "START"]
        if starts:
            # the listener's own events, under the run id every emitter derives for this Flink job
            for event in from_listener:
                emitter.emit({**with_declared_datasets(event, builder, JOB), "run": {**event["run"], "runId": run_id}})
            facets = deployment_facets(jid, version, started_by)
            emitter.emit(
                builder.event(JOB, RunState.RUNNING, run_id, dagster_run=dagster_run, engine=ENGINE, run_facets=facets)
            )
            start_sent_by = "OpenLineage Flink listener"
        else:
            context.log.warning(
                f"the OpenLineage Flink listener sent no START for {jid} (is it configured in Flink's config?); "
                "Dagster sends it instead"
            )
            for event in open_events(JOB, run_id, flink_job, version, started_by, builder, dagster_run=dagster_run):
                emitter.emit(event)
            start_sent_by = "Dagster (no listener event)"
        return dg.MaterializeResult(
            metadata={
                "flink_job_id": jid,
                "state": flink_job.state,
                "flink_version": version,
                "started_by": started_by,
                "deployment": how,
                "openlineage/run_id": run_id,
                "openlineage/start_sent_by": start_sent_by,
                "parallelism": config.parallelism,
                "schema_compatibility": f"{subject_of(output_topic.name)}: {compatibility}",
                "dead_letter_topic": DLQ_TOPIC.name,
            }
        )

    return kafka_supplier_stats
