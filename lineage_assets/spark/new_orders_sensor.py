"""New Iceberg orders -> the supplier_stats days they touch: a Dagster asset sensor on ``iceberg/default/orders``.

The Flink job sensor records a materialization of ``iceberg/default/orders`` per new Iceberg snapshot, carrying the
snapshot id (``iceberg/snapshot_id``). Dagster hands this sensor the newest materialization after its cursor (the
storage id of the one handled last). The snapshots between the two (the one the handled materialization reported,
excluded, to the new one, included) are walked along the table's parent chain, and the day partitions each changed
are read from its summary (``partitions.bid_time_day=<day>``, written because the table sets
``write.summary.partition-limit``). Those days are owed a run, under a freshness budget: a day never written is asked
for at once; a day written (or whose run started) less than the budget ago stays owed until then, so while orders
flow a day gets at most one run per budget, and each run adds only what came since (``mode: incremental``). A run's
key names the newest snapshot of its day and the day, and Dagster never launches a run key twice. A day whose run is
still queued is not asked for again: that run reads the table when it starts, new snapshot included.

The owed days are kept in the Dagster instance's key-value store (``OWED_KEY``): an asset sensor's cursor is Dagster's
own (the storage id handled last). They are looked at again with the next materialization of the orders table: while
the Flink job runs, the Flink job sensor records one per new snapshot and, caught up, one every quarter of the
freshness window, so a day owed when the orders stop gets its run within the budget and that quarter window.

Its first tick starts from the last deployment of the Flink job (the last materialization of the table by a run):
snapshots committed after it are handled, so the orders of a pipeline deployed just now are not missed; days
written before then are a backfill's job. Without a deployment on record it starts from the reported snapshot.

A catalog that does not answer fails the tick with what to do: Dagster then keeps the cursor, so the next tick
handles the same snapshots and nothing is lost.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import dagster as dg
import requests
from pyiceberg.exceptions import NoSuchTableError

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.spark.partitions import DAILY, DAY_RUN_EXECUTOR
from lineage_assets.storage import TICK_READ_TIMEOUT_S, IcebergResource
from lineage_assets.tunables import PipelineTunables

PARTITION_KEY_PREFIX = "partitions."
#: the metadata key under which a materialization of the Iceberg table names its current snapshot
SNAPSHOT_ID = "iceberg/snapshot_id"
#: the mode of the runs the sensor requests (supplier_stats' config, lineage_assets/spark/increment.py)
INCREMENTAL_MODE = "incremental"
#: the job this sensor targets: one supplier_stats day per run
SUPPLIER_STATS_DAYS_JOB = "supplier_stats_days_job"


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    summary: dict[str, str]
    committed_ms: int = 0
    #: Iceberg's operation of the snapshot: append, overwrite, delete or replace
    operation: str = "append"


class PartitionSummaryMissing(ValueError):
    """A snapshot's summary does not list the partitions it changed."""


def days_changed(summary: dict[str, str], field: str) -> set[str]:
    """The days (``YYYY-MM-DD``) of partition field ``field`` a snapshot summary says were changed."""
    if summary.get("partition-summaries-included") != "true":
        if int(summary.get("changed-partition-count") or 0) == 0:
            return set()
        raise PartitionSummaryMissing(
            f"the snapshot changed {summary.get('changed-partition-count')} partition(s) but its summary does not name "
            "them (more than write.summary.partition-limit, or the table lacks that property)"
        )
    days = set()
    for key in summary:
        if key.startswith(PARTITION_KEY_PREFIX):
            for part in key.removeprefix(PARTITION_KEY_PREFIX).split("/"):
                name, _, value = part.partition("=")
                if name == field and value and value != "null":
                    days.add(value)
    return days


def snapshots_since(snapshots: Iterable[SnapshotInfo], current: int | None, since: int | None) -> list[SnapshotInfo]:
    """The snapshots from ``current`` back to (not including) ``since`` along the parent chain, oldest first."""
    by_id = {s.snapshot_id: s for s in snapshots}
    chain: list[SnapshotInfo] = []
    at = current
    while at is not None and at != since and at in by_id:
        chain.append(by_id[at])
        at = by_id[at].parent_id
    return list(reversed(chain))


def snapshot_infos(table) -> list[SnapshotInfo]:
    """Every snapshot of a pyiceberg table as the facts the sensor and the increment planner use."""
    return [
        SnapshotInfo(
            s.snapshot_id,
            s.parent_snapshot_id,
            dict(s.summary.additional_properties) if s.summary else {},
            s.timestamp_ms,
            s.summary.operation.value if s.summary else "append",
        )
        for s in table.snapshots()
    ]


def last_handled_before(snapshots: Iterable[SnapshotInfo], current: int | None, deployed_ms: int) -> int | None:
    """The newest snapshot on the chain to ``current`` committed at or before ``deployed_ms``: the first tick's
    starting point (None: every snapshot of the chain came after the deployment)."""
    chain = snapshots_since(snapshots, current, None)
    before = [s for s in chain if s.committed_ms <= deployed_ms]
    return before[-1].snapshot_id if before else None


def last_deployment_ms(instance: dg.DagsterInstance, key: dg.AssetKey, look_back: int = 200) -> int | None:
    """When a run last materialized ``key`` (its deployment); sensor reports are runless and do not count."""
    for record in instance.fetch_materializations(key, limit=look_back).records:
        if record.run_id:
            return int(record.timestamp * 1000)
    return None


def writes(run: dg.DagsterRun, target: dg.AssetKey) -> bool:
    """Whether ``run`` computes ``target``: a run of this sensor's job (Dagster records no asset selection for a run
    of a whole asset job), or a run that selected it (a backfill, the UI)."""
    return run.job_name == SUPPLIER_STATS_DAYS_JOB or target in (run.asset_selection or ())


def queued_days(instance: dg.DagsterInstance, target: dg.AssetKey, days: Iterable[str]) -> set[str]:
    """The days of ``days`` with a run of ``target`` that has not started yet."""
    waiting = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]
    queued = set()
    for day in days:
        runs = instance.get_runs(filters=dg.RunsFilter(statuses=waiting, tags={"dagster/partition": day}))
        if any(writes(run, target) for run in runs):
            queued.add(day)
    return queued


@dataclass(frozen=True)
class Due:
    """The days to ask a run for now, and the others still owed with the time (epoch seconds) each falls due."""

    now: tuple[str, ...]
    later: Mapping[str, float]


def due_days(
    owed: Iterable[str],
    last_write: Mapping[str, float | None],
    queued: Iterable[str],
    now: float,
    budget_s: float,
) -> Due:
    """Which owed days a run is asked for now: a day never written is due at once (its first rows do not wait), a
    day whose last write (or the start of a run of it) is ``budget_s`` old is due, a day with a run waiting to start
    is neither (that run reads its new orders when it starts); every other day stays owed until it falls due."""
    waiting = set(queued)
    ready, later = [], {}
    for day in sorted(set(owed)):
        if day in waiting:
            continue
        written = last_write.get(day)
        if written is None or now - written >= budget_s:
            ready.append(day)
        else:
            later[day] = written + budget_s
    return Due(tuple(ready), later)


def last_write(instance: dg.DagsterInstance, target: dg.AssetKey, day: str) -> float | None:
    """When ``day`` of ``target`` was last written, or a run of it started (epoch seconds; None: neither)."""
    times = [
        r.timestamp
        for r in instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=target, asset_partitions=[day]), limit=1
        ).records
    ]
    started = instance.get_run_records(
        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED], tags={"dagster/partition": day}), limit=5
    )
    times += [r.start_time for r in started if r.start_time and writes(r.dagster_run, target)]
    return max(times, default=None)


def owed_key(sensor: str) -> str:
    """Where the instance keeps the days ``sensor`` owes a run."""
    return f"lineage-lab/{sensor}/owed-days"


def owed_days(instance: dg.DagsterInstance, sensor: str) -> dict[str, int]:
    """The days ``sensor`` owes a run (day -> the newest snapshot that changed it)."""
    text = instance.run_storage.get_cursor_values({owed_key(sensor)}).get(owed_key(sensor))
    return {day: int(snapshot) for day, snapshot in json.loads(text).items()} if text else {}


def keep_owed(instance: dg.DagsterInstance, sensor: str, owed: Mapping[str, int]) -> None:
    instance.run_storage.set_cursor_values({owed_key(sensor): json.dumps(dict(sorted(owed.items())))})


class CatalogUnavailable(RuntimeError):
    """The Iceberg catalog did not answer: the tick fails, so Dagster keeps the cursor and nothing is skipped."""


def reported_snapshot(record: dg.EventLogRecord | None) -> int | None:
    """The snapshot id a materialization of the Iceberg table reported (None: none, or the table was empty)."""
    materialization = record.asset_materialization if record else None
    value = materialization.metadata.get(SNAPSHOT_ID) if materialization else None
    text = str(getattr(value, "value", value) or "")
    return int(text) if text.lstrip("-").isdigit() else None


def handled_snapshot(instance: dg.DagsterInstance, key: dg.AssetKey, cursor: str | None) -> int | None:
    """The snapshot reported by the materialization at ``cursor`` (the last one handled), or by the newest one
    before it that reported any."""
    if not cursor or not cursor.isdigit():
        return None
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, before_storage_id=int(cursor) + 1), limit=20
    ).records
    return next((s for s in map(reported_snapshot, records) if s is not None), None)


def build_supplier_stats_partition_sensor(
    pipeline: Pipeline,
    name: str = "supplier_stats_new_orders_sensor",
    freshness_s: int = 0,
    interval_s: int = PipelineTunables.sensor_interval_s,
) -> dg.AssetSensorDefinition:
    """``freshness_s``: how long a day may lag its newest orders while they flow (0: a run per new snapshot);
    ``interval_s``: seconds between two ticks."""
    source = pipeline.dataset("iceberg_orders")
    target = pipeline.dataset("iceberg_supplier_stats")
    source_key, target_key = asset_key(source), asset_key(target)
    job = dg.define_asset_job(
        SUPPLIER_STATS_DAYS_JOB,
        selection=[target_key],
        description=f"One day of {target_key.to_user_string()}: what the new-orders sensor requests.",
        executor_def=DAY_RUN_EXECUTOR,
    )

    @dg.asset_sensor(
        asset_key=source_key,
        name=name,
        job=job,
        minimum_interval_seconds=interval_s,
        description=f"Requests {target_key.to_user_string()} for the days that new Iceberg snapshots of "
        f"{source_key.to_user_string()} changed (from each snapshot's partition summary), each run adding only what "
        f"is new; while orders flow, a day gets a run at most once per {freshness_s} s (its freshness budget).",
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def supplier_stats_new_orders_sensor(
        context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry, iceberg: IcebergResource
    ) -> list[dg.RunRequest] | dg.SkipReason:
        until = reported_snapshot(_record(asset_event))
        if until is None:
            return dg.SkipReason(f"the new materialization of {source_key.to_user_string()} reports no snapshot")
        try:
            table = iceberg.catalog(TICK_READ_TIMEOUT_S).load_table(source.table_name)
        except NoSuchTableError:
            return dg.SkipReason(
                f"Iceberg table {source.table_name} does not exist: materialize {source_key.to_user_string()}"
            )
        except requests.RequestException as exc:
            raise CatalogUnavailable(
                f"the Iceberg catalog at {iceberg.uri} did not answer ({exc}): start it (`lineage-lab stack up`) or "
                "point the iceberg resource at the right catalog; the next tick handles the same snapshots"
            ) from exc
        infos = snapshot_infos(table)
        if context.cursor and context.cursor.isdigit():
            since = handled_snapshot(context.instance, source_key, context.cursor)
        elif context.cursor and context.cursor.startswith("{"):  # the cursor of the earlier, standard sensor
            since = json.loads(context.cursor).get("snapshot")
        else:
            deployed = last_deployment_ms(context.instance, source_key)
            if deployed is None:  # nothing deployed from here: the days already in the table are a backfill's job
                return dg.SkipReason(
                    f"watching {source.table_name} from snapshot {until} on; backfill earlier days from the "
                    "asset's page"
                )
            since = last_handled_before(infos, until, deployed)
        field = table.spec().fields[0].name
        new = snapshots_since(infos, until, since)
        days: dict[str, int] = {}  # day -> the newest snapshot that changed it
        for snapshot in new:
            try:
                for day in days_changed(snapshot.summary, field):
                    days[day] = snapshot.snapshot_id
            except PartitionSummaryMissing as exc:
                context.log.warning(f"snapshot {snapshot.snapshot_id}: {exc}; its days are not requested")
        valid = {day for day in days if DAILY.has_partition_key(day)}
        for day in sorted(set(days) - valid):
            context.log.warning(f"{day} is outside the partitions of {target_key.to_user_string()}: not requested")
        owed = owed_days(context.instance, name) | {day: days[day] for day in valid}
        waiting = queued_days(context.instance, target_key, owed)
        for day in sorted(waiting):
            context.log.info(f"{day}: a run is already queued and will read the new snapshot(s) when it starts")
        written = {day: last_write(context.instance, target_key, day) for day in owed if day not in waiting}
        due = due_days(owed, written, waiting, time.time(), freshness_s)
        keep_owed(context.instance, name, {day: owed[day] for day in due.later})
        # the sensor's runs add only what is new to the day (the run itself falls back to the whole day when
        # something other than an append changed it)
        incremental = {"ops": {target_key.to_python_identifier(): {"config": {"mode": INCREMENTAL_MODE}}}}
        run_requests = [
            dg.RunRequest(run_key=f"{owed[day]}:{day}", partition_key=day, run_config=incremental) for day in due.now
        ]
        if run_requests:
            return run_requests
        later = ", ".join(
            f"{day} at {dt.datetime.fromtimestamp(at, dt.UTC):%H:%M:%S} UTC" for day, at in sorted(due.later.items())
        )
        owing = f"; owed, due within the freshness budget: {later}" if later else ""
        return dg.SkipReason(f"{len(new)} new snapshot(s), no day to recompute now{owing}")

    return supplier_stats_new_orders_sensor


def _record(entry: dg.EventLogEntry) -> dg.EventLogRecord:
    """The event as a record (storage id unknown), so one reader serves both."""
    return dg.EventLogRecord(storage_id=0, event_log_entry=entry)
