"""The Flink job sensor: follows each pipeline job by name on the cluster, whoever started it (the engine is the
truth, not what this Dagster instance deployed). Each tick it finds the current job of each name (the running one,
else the newest), reports it (job id, state, deployment version, how it started, records, last checkpoint, consumer
lag, and the Iceberg snapshot and row count or the output records), records a materialization when new data is
there or when the job runs caught up with its input (see freshness.py), and keeps the OpenLineage runs in step:
a running job without an open run gets one (START, RUNNING), a run whose job stopped, vanished or was replaced is
closed once, and any other run Marquez holds open for the job name is closed too, so one job name never has two
open runs."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dagster as dg
import requests
from openlineage.client.event_v2 import RunEvent

from flink_jobs.deployment import VERSION
from lineage_assets.flink.client import ACTIVE, FlinkClient, FlinkError, FlinkJob
from lineage_assets.flink.deploy import deployed_here
from lineage_assets.flink.job_lineage import flink_account, listener_events_of
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.flink.runs import ENGINE, FOUND_RUNNING, close_run, flink_run_id, open_events
from lineage_assets.freshness import CAUGHT_UP, NEW_DATA, REASON, caught_up_materialization_due
from lineage_assets.kafka.observed import observed_event_builder
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import KafkaUnavailable, consumer_lag, end_offsets
from lineage_assets.latest_checks import LatestChecks
from lineage_assets.lineage.account import Account, Unknown, reportable
from lineage_assets.lineage.events import EventBuilder, RunState
from lineage_assets.lineage.identity import CONSUMER_GROUPS, Dataset, Pipeline
from lineage_assets.lineage.marquez_client import MarquezError
from lineage_assets.lineage.open_runs import open_runs, run_facet
from lineage_assets.lineage.outbox import LineageEmitter
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key
from lineage_assets.storage import TICK_READ_TIMEOUT_S, IcebergResource
from lineage_assets.tunables import PipelineTunables

#: (facts about the job's output, a marker that changes exactly when new data arrived)
OutputFacts = tuple[dict[str, object], str | None]


@dataclass(frozen=True)
class TrackedJob:
    name: str
    dataset_key: str
    consumer_group: str
    output_facts: Callable[[Pipeline, Dataset, IcebergResource, KafkaResource], OutputFacts]


def iceberg_facts(pipeline: Pipeline, target: Dataset, iceberg: IcebergResource, kafka: KafkaResource) -> OutputFacts:
    snapshot = iceberg.catalog(TICK_READ_TIMEOUT_S).load_table(target.table_name).current_snapshot()
    rows = int(snapshot.summary.get("total-records", 0)) if snapshot and snapshot.summary else 0
    snapshot_id = str(snapshot.snapshot_id) if snapshot else None
    return {"iceberg/snapshot_id": snapshot_id or "none", "dagster/row_count": rows}, snapshot_id


def topic_facts(pipeline: Pipeline, target: Dataset, iceberg: IcebergResource, kafka: KafkaResource) -> OutputFacts:
    written = sum(end_offsets(kafka.connection(), target.name).values())
    return {"output_records": written}, str(written) if written else None


def tracked_jobs(pipeline: Pipeline) -> tuple[TrackedJob, ...]:
    """Every Flink job of the identity module, with the dataset it produces and the facts of that output: an Iceberg
    table's snapshot and rows, else a topic's records."""
    return tuple(
        TrackedJob(
            job.name,
            (output := pipeline.output(job.name)).key,
            CONSUMER_GROUPS[job.name],
            iceberg_facts if output.asset_key[0] == "iceberg" else topic_facts,
        )
        for job in pipeline.flink_jobs()
    )


def input_lag(pipeline: Pipeline, tracked: TrackedJob, kafka: KafkaResource) -> int | None:
    """Records of the job's input topic its consumer group has not committed (None: no offsets committed yet)."""
    (source,) = pipeline.job(tracked.name).inputs
    return consumer_lag(kafka.connection(), pipeline.dataset(source).name, tracked.consumer_group)


def _ending(jobs: list[FlinkJob] | None, jid: str | None) -> str:
    """The state that ends the run of Flink job ``jid``: its own state when the cluster knows it and it stopped,
    ``GONE`` when the cluster (or the job) is gone, ``SUPERSEDED`` when it still runs beside a newer one."""
    job = next((j for j in jobs or () if j.jid == jid), None)
    if job is None:
        return "GONE"
    return "SUPERSEDED" if job.state in ACTIVE else job.state


def _close(
    tracked: str,
    run_id: str,
    state: str,
    client: FlinkClient,
    jid: str | None,
    builder: EventBuilder,
    account: Account,
) -> RunEvent | None:
    cause = None
    if state == "FAILED" and jid:
        try:
            cause = client.failure_cause(jid)
        except FlinkError:
            cause = None
    ending = "GONE" if state == "SUPERSEDED" else state
    return close_run(tracked, run_id, ending, builder, dt.datetime.now(dt.UTC), cause, account=account)


def job_account(
    pipeline: Pipeline, name: str, client: FlinkClient, jid: str, config: dict[str, str] | None
) -> Account | Unknown:
    """The engine's account of Flink job ``jid`` from its configuration (None: the cluster did not give it) and the
    listener's events on this host."""
    if config is None:
        return Unknown(name, f"Flink at {client.url} did not give Flink job {jid}'s configuration this tick")
    path = client.listener_events_file()
    return flink_account(pipeline, name, jid, listener_events_of(path, jid), config, str(path), client.url)


@dataclass(frozen=True)
class Emitting:
    """Where a tick's lineage events go, and its log."""

    builder: EventBuilder
    emitter: LineageEmitter
    log: Any


def follow_account(
    pipeline: Pipeline,
    name: str,
    client: FlinkClient,
    jid: str,
    config: dict[str, str] | None,
    seen: dict,
    run_id: str,
    out: Emitting,
) -> Account:
    """The account to report for a running job: the engine's now, else the last one reported (``seen``, the job's
    cursor entry, keeps it), else the declaration saying it stands in. When the engine's account differs from the
    last one reported while the run is open (restarted with other arguments, another plan), a RUNNING event carries
    the new one: Marquez follows the engine within a tick."""
    last = Account.from_dict(seen["account"]) if seen.get("account") else None
    found = job_account(pipeline, name, client, jid, config)
    if isinstance(found, Unknown):
        out.log.warning(f"{name}: the engine's account of its lineage is unknown: {found.reason}")
        return reportable(pipeline, found, last)
    if seen.get("open") == run_id and found.to_dict() != seen.get("account"):
        out.emitter.emit(out.builder.event(name, RunState.RUNNING, run_id, engine=ENGINE, account=found))
        out.log.info(f"{name}: lineage now as {found.reader}: run {run_id} RUNNING again")
    seen["account"] = found.to_dict()
    return found


def build_flink_job_sensor(
    pipeline: Pipeline,
    fresh_minutes: int = PipelineTunables.streaming_fresh_minutes,
    latest_checks: LatestChecks | None = None,
    interval_s: int = PipelineTunables.sensor_interval_s,
) -> dg.SensorDefinition:
    """``fresh_minutes``: the streaming outputs' freshness window (a caught-up job's output is materialized every
    quarter of it); ``latest_checks``: the run of the checks of each asset this sensor materializes, asked for in the
    same tick; ``interval_s``: seconds between two ticks."""
    followed = tracked_jobs(pipeline)

    @dg.sensor(
        name="flink_job_sensor",
        minimum_interval_seconds=interval_s,
        description="Follows the Flink jobs "
        f"({', '.join(t.name for t in followed)}) by name on the cluster, whoever started them: state, version, "
        "records, checkpoints and output data; opens an OpenLineage run for a running job that has none and closes "
        "a run (ABORT, FAIL or COMPLETE) when its job stops, is replaced, is lost, or the cluster goes away.",
        default_status=dg.DefaultSensorStatus.RUNNING,
        job_name=latest_checks.job_name if latest_checks else None,
    )
    def flink_job_sensor(
        context: dg.SensorEvaluationContext,
        iceberg: IcebergResource,
        kafka: KafkaResource,
        lineage: LineageResource,
        flink: FlinkResource,
    ) -> dg.SensorResult | dg.SkipReason:
        cursor = json.loads(context.cursor) if context.cursor else {}
        client = flink.client()
        builder, registered = observed_event_builder(pipeline, kafka.registry())
        emitter = lineage.emitter()
        outbox = lineage.outbox()
        out = Emitting(builder, emitter, context.log)
        try:
            jobs: list[FlinkJob] | None = client.jobs()
        except FlinkError as exc:
            context.log.warning(f"Flink unreachable: every open run of its jobs is closed as gone: {exc}")
            jobs = None
        events: list = []
        absent = []
        for tracked in followed:
            job = pipeline.job(tracked.name)
            target = pipeline.dataset(tracked.dataset_key)
            key = asset_key(target)
            seen = cursor.setdefault(tracked.name, {"closed": [], "data": None})
            current = FlinkClient.current_of(jobs, tracked.name) if jobs is not None else None
            state = current.state if current else "GONE"

            version, started_by, run_id, here, config = None, None, None, None, None
            if current is not None:
                run_id = flink_run_id(job, current.jid, current.start_time_ms)
                try:
                    config = client.user_config(current.jid)
                except FlinkError:
                    config = None
                version = config.get(VERSION) if config else None
                here = deployed_here(context.instance, key, current.jid)
                started_by = here or FOUND_RUNNING
            live = current is not None and current.state in ACTIVE
            last = Account.from_dict(seen["account"]) if seen.get("account") else None
            account = (
                follow_account(pipeline, tracked.name, client, current.jid, config, seen, run_id, out) if live else last
            )
            # a run ends with the account of its own job (the last one reported): Marquez 0.51 makes a run's end the
            # job's current version, so the end goes before the next run's opening (this tick closes first, and the
            # outbox delivers a job's events in order)
            closing = reportable(pipeline, Unknown(tracked.name, "the job has ended"), last)

            def close(
                run_id: str,
                jid: str | None,
                ending: str,
                seen: dict = seen,
                name: str = tracked.name,
                closing: Account = closing,
            ) -> bool:
                """Close a run once, when its job has ended; True once it is closed. Not again when this outbox
                already holds its end (the deployment that replaced the job, or `stack down`, closed it); not yet
                while the job is still on its way out (CANCELLING, FAILING, SUSPENDED): a later tick closes it.
                The closing event carries the last account this sensor reported (the declaration never overwrites an
                observation)."""
                if not outbox.ended(run_id):
                    event = _close(name, run_id, ending, client, jid, builder, closing)
                    if event is None:
                        return False
                    emitter.emit(event)
                    context.log.info(f"{name}: Flink job {jid} is {ending}: run {run_id} closed")
                seen["closed"] = [*seen.get("closed", [])[-50:], run_id]
                return True

            # any other run Marquez holds open for this job name (opened elsewhere, or a close that was lost); closed
            # first, so that the run this sensor holds (closed or open below) is the job's newest event
            try:
                keep = {seen.get("open"), flink_run_id(job, current.jid, current.start_time_ms) if live else None}
                stale = [r for r in open_runs(lineage.marquez(), job) if r["id"] not in keep]
            except MarquezError as exc:
                context.log.warning(f"cannot read {tracked.name}'s open runs from Marquez: {exc}")
                stale = []
            for run in stale:
                if run["id"] in seen.get("closed", []):
                    continue  # closed by this sensor already; Marquez has not received it yet
                jid = run_facet(run, "flink_deployment", "jobId") or run_facet(run, "flink_job", "jobId")
                close(run["id"], jid, _ending(jobs, jid))

            # the run this sensor holds open ends when its Flink job stopped, vanished or was replaced
            held = seen.get("open")
            if held and not (current and current.jid == seen.get("jid") and current.state in ACTIVE):
                ending = state if current and current.jid == seen.get("jid") else _ending(jobs, seen.get("jid"))
                if close(held, seen.get("jid"), ending):
                    seen["open"] = None

            if current is not None and current.state in ACTIVE:
                if seen.get("open") != run_id:
                    if str(seen.get("by", "")).startswith("Dagster run") and started_by == FOUND_RUNNING:
                        context.log.warning(
                            f"{tracked.name}: Flink job {current.jid}, started outside this Dagster instance, replaces "
                            f"job {seen.get('jid')} that {seen['by']} deployed"
                        )
                    if here is None:  # a deployment (or adoption) in this instance sent its own START
                        opened = (tracked.name, run_id, current, version, started_by, builder)
                        for event in open_events(*opened, account=account):
                            emitter.emit(event)
                        context.log.info(f"{tracked.name}: found Flink job {current.jid} running: run {run_id} opened")
                    seen.update({"open": run_id, "jid": current.jid, "by": started_by, "schema": None})
                if registered and seen.get("schema") != registered.label:
                    # the input topic got a new schema version since the last tick (the source gained a column): the
                    # open run says so, so its datasets get a new version and the new column its column lineage. The
                    # first sight of a version only records it: the run's opening events carried it already.
                    if seen.get("schema") is not None:
                        emitter.emit(
                            builder.event(tracked.name, RunState.RUNNING, run_id, engine=ENGINE, account=account)
                        )
                        context.log.info(f"{tracked.name}: input schema {registered.label}, run {run_id} RUNNING again")
                    seen["schema"] = registered.label

            if current is None and jobs is not None and not seen.get("jid"):
                absent.append(tracked.name)
                continue
            facts: dict[str, object] = {
                "flink_job_id": current.jid if current else str(seen.get("jid") or "none"),
                "state": state,
                "flink_version": version or "unknown",
                "started_by": started_by or "unknown",
                "openlineage/run_id": run_id or "none",
                "lineage/observed": account.reader if account else "none (no account read yet)",
            }
            if current is not None:
                try:
                    checkpoint = client.last_checkpoint(current.jid)
                    records_in, records_out = client.record_counts(current.jid)
                    facts |= {
                        "last_checkpoint": f"{checkpoint['id']} at {checkpoint['latest_ack_timestamp']}"
                        if checkpoint
                        else "none",
                        "records_in": records_in,
                        "records_out": records_out,
                    }
                except FlinkError as exc:
                    context.log.warning(f"{tracked.name}: no metrics this tick: {exc}")
            # the job's state is still worth reporting when a store does not answer: no data facts this tick
            output: dict[str, object]
            try:
                output, marker = tracked.output_facts(pipeline, target, iceberg, kafka)
                output_known = True
            except KafkaUnavailable as exc:
                context.log.warning(str(exc))
                output, marker, output_known = {"kafka": str(exc)}, None, False
            except (requests.RequestException, OSError) as exc:  # the catalog or its files: refused, or no answer
                problem = (
                    f"the Iceberg catalog at {iceberg.uri} (or its files at {iceberg.s3_endpoint}) did not answer "
                    f"({exc}); is it up (`lineage-lab stack status`)?"
                )
                context.log.warning(problem)
                output, marker, output_known = {"iceberg": problem}, None, False
            try:
                lag = input_lag(pipeline, tracked, kafka)
            except KafkaUnavailable as exc:
                context.log.warning(str(exc))
                output, lag = {**output, "kafka": str(exc)}, None
            facts |= {**output, "consumer_lag": lag if lag is not None else "unknown (no committed offsets)"}
            events.append(dg.AssetObservation(asset_key=key, metadata=facts))
            # a materialization when the output got new data, or when the job is running and has consumed all its
            # input: freshness policies see the output current, and late once the job stops or falls behind
            reason = None
            if marker is not None and marker != seen.get("data"):
                reason = NEW_DATA
            elif state == "RUNNING" and lag == 0 and output_known:  # a materialization names what is in the output
                latest = context.instance.get_latest_materialization_event(key)
                due = caught_up_materialization_due(latest.timestamp if latest else None, time.time(), fresh_minutes)
                reason = CAUGHT_UP if due else None
            if reason:
                events.append(dg.AssetMaterialization(asset_key=key, metadata={**facts, REASON: reason}))
                seen["data"] = marker
        if not events:
            return dg.SkipReason(f"no Flink job of these names on {client.url}: {', '.join(absent)}")
        run_requests = []
        if latest_checks is not None:
            materialized = [e.asset_key for e in events if isinstance(e, dg.AssetMaterialization)]
            request = latest_checks.request(context.instance, "flink_job_sensor", materialized, cursor, time.time())
            run_requests = [request] if request else []
        return dg.SensorResult(asset_events=events, run_requests=run_requests, cursor=json.dumps(cursor))

    return flink_job_sensor
