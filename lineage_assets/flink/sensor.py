"""The Flink job sensor: observes each Flink job Dagster deployed (state, records in and out, last checkpoint,
consumer lag, and per job: the Iceberg snapshot and row count, or the output records), records a materialization
when new data is there (a new Iceberg snapshot, more records in the output topic) or when the job runs caught up
with its input (see freshness.py), and closes the job's OpenLineage run the moment the job stops running, is lost,
or the cluster goes away."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.flink import iceberg_ingestion, supplier_stats
from lineage_assets.flink.client import FlinkError
from lineage_assets.flink.runs import ENGINE, close_run
from lineage_assets.freshness import CAUGHT_UP, NEW_DATA, REASON, caught_up_materialization_due
from lineage_assets.kafka.topics import KafkaUnavailable, consumer_lag, end_offsets
from lineage_assets.lineage.events import RunState
from lineage_assets.lineage.identity import Dataset, Pipeline
from lineage_assets.lineage.observed import observed_event_builder
from lineage_assets.metadata import asset_key
from lineage_assets.resources import FlinkResource, IcebergResource, KafkaResource, LineageResource

#: (facts about the job's output, a marker that changes exactly when new data arrived)
OutputFacts = tuple[dict[str, object], str | None]


@dataclass(frozen=True)
class TrackedJob:
    name: str
    dataset_key: str
    consumer_group: str
    output_facts: Callable[[Pipeline, Dataset, IcebergResource, KafkaResource], OutputFacts]


def iceberg_facts(pipeline: Pipeline, target: Dataset, iceberg: IcebergResource, kafka: KafkaResource) -> OutputFacts:
    snapshot = iceberg.catalog().load_table(target.symlinks[0].name).current_snapshot()
    rows = int(snapshot.summary.get("total-records", 0)) if snapshot and snapshot.summary else 0
    snapshot_id = str(snapshot.snapshot_id) if snapshot else None
    return {"iceberg/snapshot_id": snapshot_id or "none", "dagster/row_count": rows}, snapshot_id


def topic_facts(pipeline: Pipeline, target: Dataset, iceberg: IcebergResource, kafka: KafkaResource) -> OutputFacts:
    written = sum(end_offsets(kafka.connection(), target.name).values())
    return {"output_records": written}, str(written) if written else None


TRACKED = (
    TrackedJob(iceberg_ingestion.JOB, "iceberg_orders", iceberg_ingestion.CONSUMER_GROUP, iceberg_facts),
    TrackedJob(supplier_stats.JOB, "kafka_supplier_stats", supplier_stats.CONSUMER_GROUP, topic_facts),
)


def input_lag(pipeline: Pipeline, tracked: TrackedJob, kafka: KafkaResource) -> int | None:
    """Records of the job's input topic its consumer group has not committed (None: no offsets committed yet)."""
    (source,) = pipeline.job(tracked.name).inputs
    return consumer_lag(kafka.connection(), pipeline.dataset(source).name, tracked.consumer_group)


def build_flink_job_sensor(pipeline: Pipeline, settings: StackSettings) -> dg.SensorDefinition:
    @dg.sensor(
        name="flink_job_sensor",
        minimum_interval_seconds=30,
        description="State, records, checkpoints and output data of the Flink jobs "
        f"({', '.join(t.name for t in TRACKED)}); closes a job's OpenLineage run (ABORT, FAIL or COMPLETE) when "
        "the job stops, is lost, or the cluster goes away.",
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def flink_job_sensor(
        context: dg.SensorEvaluationContext,
        iceberg: IcebergResource,
        kafka: KafkaResource,
        lineage: LineageResource,
        flink: FlinkResource,
    ) -> dg.SensorResult | dg.SkipReason:
        cursor = json.loads(context.cursor) if context.cursor else {}
        client = flink.client(settings)
        builder, registered = observed_event_builder(pipeline, kafka.registry())
        events: list = []
        skipped = []
        for tracked in TRACKED:
            target = pipeline.dataset(tracked.dataset_key)
            key = asset_key(target)
            latest = context.instance.get_latest_materialization_event(key)
            meta = latest.asset_materialization.metadata if latest and latest.asset_materialization else {}
            if "flink_job_id" not in meta or "openlineage/run_id" not in meta:
                skipped.append(f"{tracked.name} (materialize {key.to_user_string()})")
                continue
            jid, run_id = meta["flink_job_id"].value, meta["openlineage/run_id"].value
            seen = cursor.setdefault(tracked.name, {"closed": [], "data": None})
            try:
                job = client.job(jid)
                state = job.state if job else "GONE"
            except FlinkError as exc:
                context.log.warning(f"Flink unreachable, treating {tracked.name} job {jid} as gone: {exc}")
                state = "GONE"
            if run_id not in seen["closed"]:
                cause = client.failure_cause(jid) if state == "FAILED" else None
                event = close_run(tracked.name, run_id, state, builder, dt.datetime.now(dt.UTC), cause)
                if event is not None:
                    lineage.emitter().emit(event)
                    seen["closed"] = [*seen["closed"][-50:], run_id]
                    context.log.info(f"{tracked.name} job {jid} is {state}: run {run_id} closed ({event.eventType})")
                elif state == "RUNNING" and registered and seen.get("schema") != registered.label:
                    # the input topic got a new schema version since the last tick (the source gained a column): the
                    # open run says so, so its datasets get a new version and the new column its column lineage. The
                    # first sight of a version only records it: the deployment's events carried it already.
                    if seen.get("schema") is not None:
                        lineage.emitter().emit(builder.event(tracked.name, RunState.RUNNING, run_id, engine=ENGINE))
                        context.log.info(f"{tracked.name}: input schema {registered.label}, run {run_id} RUNNING again")
                    seen["schema"] = registered.label

            facts: dict[str, object] = {"flink_job_id": jid, "state": state}
            if state != "GONE":
                checkpoint = client.last_checkpoint(jid)
                records_in, records_out = client.record_counts(jid)
                facts |= {
                    "last_checkpoint": f"{checkpoint['id']} at {checkpoint['latest_ack_timestamp']}"
                    if checkpoint
                    else "none",
                    "records_in": records_in,
                    "records_out": records_out,
                }
            try:
                output, marker = tracked.output_facts(pipeline, target, iceberg, kafka)
                lag = input_lag(pipeline, tracked, kafka)
            except KafkaUnavailable as exc:  # the job's state is still worth reporting; no data facts this tick
                context.log.warning(str(exc))
                output, marker, lag = {"kafka": str(exc)}, None, None
            facts |= {**output, "consumer_lag": lag if lag is not None else "unknown (no committed offsets)"}
            events.append(dg.AssetObservation(asset_key=key, metadata=facts))
            # a materialization when the output got new data, or when the job is running and has consumed all its
            # input: freshness policies see the output current, and late once the job stops or falls behind
            reason = None
            if marker is not None and marker != seen["data"]:
                reason = NEW_DATA
            elif state == "RUNNING" and lag == 0:
                reason = CAUGHT_UP if caught_up_materialization_due(latest.timestamp, time.time(), settings) else None
            if reason:
                metadata = {**facts, "openlineage/run_id": run_id, REASON: reason}
                events.append(dg.AssetMaterialization(asset_key=key, metadata=metadata))
                seen["data"] = marker
        if not events:
            return dg.SkipReason(f"no Flink job has been deployed from Dagster yet: {', '.join(skipped)}")
        return dg.SensorResult(asset_events=events, cursor=json.dumps(cursor))

    return flink_job_sensor
