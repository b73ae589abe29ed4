"""New Iceberg orders -> the supplier_stats days they touch.

When ``iceberg/default/orders`` records a materialization (the Flink job sensor records one per new Iceberg
snapshot), this sensor walks the table's snapshots committed since the last one it handled and reads the day
partitions each changed from its summary (``partitions.bid_time_day=<day>``, written because the table sets
``write.summary.partition-limit``). It requests a ``supplier_stats`` run for exactly those days, once: the cursor
(the last materialization and snapshot handled) is stored by Dagster and survives restarts, and each request's run
key names the snapshot and day, so a request is never made twice. A day whose run is still queued is not asked for
again: that run reads the table when it starts, new snapshot included.

Its first tick starts from the last deployment of the Flink job (the last materialization of the table by a run):
snapshots committed after it are handled, so the orders of a pipeline deployed just now are not missed; days
written before then are a backfill's job. Without a deployment on record it starts from the current snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import dagster as dg
import requests
from pyiceberg.exceptions import NoSuchTableError

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.resources import IcebergResource
from lineage_assets.spark.supplier_stats import DAILY

PARTITION_KEY_PREFIX = "partitions."


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    summary: dict[str, str]
    committed_ms: int = 0


class PartitionSummaryMissing(ValueError):
    """A snapshot's summary does not list the partitions it changed."""


def days_changed(summary: dict[str, str], field: str) -> set[str]:
    """The days (``YYYY-MM-DD``) of partition field ``field`` a snapshot summary says were changed."""
    if summary.get("partition-summaries-included") != "true":
        if int(summary.get("changed-partition-count", "0") or 0) == 0:
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


def queued_days(instance: dg.DagsterInstance, target: dg.AssetKey, days: Iterable[str]) -> set[str]:
    """The days of ``days`` with a run of ``target`` that has not started yet."""
    waiting = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]
    queued = set()
    for day in days:
        runs = instance.get_runs(filters=dg.RunsFilter(statuses=waiting, tags={"dagster/partition": day}))
        if any(target in (run.asset_selection or ()) for run in runs):
            queued.add(day)
    return queued


def build_supplier_stats_partition_sensor(pipeline: Pipeline, name: str = "supplier_stats_new_orders_sensor"):
    source = pipeline.dataset("iceberg_orders")
    target = pipeline.dataset("iceberg_supplier_stats")
    source_key, target_key = asset_key(source), asset_key(target)

    @dg.sensor(
        name=name,
        minimum_interval_seconds=30,
        asset_selection=[target_key],
        description=f"Requests {target_key.to_user_string()} for exactly the days that new Iceberg snapshots of "
        f"{source_key.to_user_string()} changed (from each snapshot's partition summary), once per snapshot.",
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def supplier_stats_new_orders_sensor(context: dg.SensorEvaluationContext, iceberg: IcebergResource):
        cursor = json.loads(context.cursor) if context.cursor else None
        records = context.instance.fetch_materializations(source_key, limit=1).records
        latest = records[0] if records else None
        if latest is None or (cursor and latest.storage_id == cursor["event"]):
            return dg.SkipReason(f"no new materialization of {source_key.to_user_string()}")
        try:
            table = iceberg.catalog().load_table(source.symlinks[0].name)
        except NoSuchTableError:
            return dg.SkipReason(
                f"Iceberg table {source.symlinks[0].name} does not exist: materialize {source_key.to_user_string()}"
            )
        except requests.RequestException as exc:  # nothing handled: the next tick starts from the same cursor
            return dg.SkipReason(f"the Iceberg catalog at {iceberg.uri} did not answer ({exc}): is it up?")
        current = table.current_snapshot()
        current_id = current.snapshot_id if current else None
        infos = [
            SnapshotInfo(
                s.snapshot_id,
                s.parent_snapshot_id,
                dict(s.summary.additional_properties) if s.summary else {},
                s.timestamp_ms,
            )
            for s in table.snapshots()
        ]
        new_cursor = json.dumps({"event": latest.storage_id, "snapshot": current_id})
        if cursor is None:
            deployed = last_deployment_ms(context.instance, source_key)
            if deployed is None:  # nothing deployed from here: the days already in the table are a backfill's job
                return dg.SensorResult(
                    skip_reason=f"watching {source.symlinks[0].name} from snapshot {current_id or 'none'} on; "
                    "backfill earlier days from the asset's page",
                    cursor=new_cursor,
                )
            cursor = {"snapshot": last_handled_before(infos, current_id, deployed)}
        field = table.spec().fields[0].name
        new = snapshots_since(infos, current_id, cursor["snapshot"])
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
        waiting = queued_days(context.instance, target_key, valid)
        for day in sorted(waiting):
            context.log.info(f"{day}: a run is already queued and will read the new snapshot(s) when it starts")
        run_requests = [
            dg.RunRequest(run_key=f"{snap}:{day}", partition_key=day, asset_selection=[target_key])
            for day, snap in sorted(days.items())
            if day in valid - waiting
        ]
        if not run_requests:
            return dg.SensorResult(skip_reason=f"{len(new)} new snapshot(s), no day to recompute", cursor=new_cursor)
        return dg.SensorResult(run_requests=run_requests, cursor=new_cursor)

    return supplier_stats_new_orders_sensor
