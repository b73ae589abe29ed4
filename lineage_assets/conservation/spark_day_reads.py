"""The Spark hop's Iceberg reads: snapshots' summaries and ancestry, a day's rows from the manifests (pruned by
partition bounds, never a row read), the day's orders at a snapshot walked from the last one counted, the days a
supplier_stats snapshot changed, and what is remembered of them (``Memo``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lineage_assets.conservation.spark_day_figures import Unknowable, count_along, partition_delta
from lineage_assets.conservation.stores import Stores


def summary_of(snapshot) -> dict[str, str]:
    return dict(snapshot.summary.additional_properties) if snapshot is not None and snapshot.summary else {}


def operation_of(snapshot) -> str:
    op = snapshot.summary.operation if snapshot.summary else None
    return getattr(op, "value", str(op or "?"))


def ancestry_of(table, snapshot_id: int | None) -> list:
    """The snapshot and its retained ancestors, newest first."""
    chain = []
    current = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    while current is not None:
        chain.append(current)
        current = table.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id else None
    return chain


def date_of(days: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=days)).isoformat()


def day_field(table, spec_id: int, source: str, transform: str) -> tuple[int, str] | None:
    """(position, name) of the partition field deriving the day from ``source`` with ``transform`` in a spec."""
    spec = table.specs()[spec_id]
    column = table.schema().find_field(source).field_id
    for pos, f in enumerate(spec.fields):
        if f.source_id == column and str(f.transform) == transform:
            return pos, f.name
    return None


def manifests_of_day(table, snapshot, day: str, source: str, transform: str):
    """(manifest, position of the day field) of the manifests that may hold ``day`` (pruned by their bounds)."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import DateType

    wanted = (dt.date.fromisoformat(day) - dt.date(1970, 1, 1)).days
    for manifest in snapshot.manifests(table.io):
        found = day_field(table, manifest.partition_spec_id, source, transform)
        if found is None:
            raise Unknowable(f"{table.name()} spec {manifest.partition_spec_id} has no {transform}({source}) field")
        pos, _ = found
        bounds = (manifest.partitions or [None] * (pos + 1))[pos]
        if bounds is not None and bounds.lower_bound is not None and bounds.upper_bound is not None:
            low, high = from_bytes(DateType(), bounds.lower_bound), from_bytes(DateType(), bounds.upper_bound)
            if not low <= wanted <= high:
                continue
        elif bounds is not None and bounds.lower_bound is None and not bounds.contains_null:
            continue  # an empty manifest
        yield manifest, pos, wanted


def manifest_day_rows(table, snapshot_id: int, day: str) -> int:
    """Rows of ``day`` in orders at a snapshot from its live manifest entries: data files' record counts (the
    day's files only). With delete files of the day, the day is read instead (their rows may overlap)."""
    from pyiceberg.manifest import DataFileContent

    snapshot = table.snapshot_by_id(snapshot_id)
    rows, deletes = 0, False
    for manifest, pos, wanted in manifests_of_day(table, snapshot, day, "bid_time", "day"):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.partition[pos] != wanted:
                continue
            if entry.data_file.content == DataFileContent.DATA:
                rows += entry.data_file.record_count
            elif entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                raise Unknowable(f"{table.name()} has equality deletes for {day}; their rows cannot be counted")
            else:
                deletes = True
    if not deletes:
        return rows
    end = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
    scan = table.scan(
        row_filter=f"bid_time >= '{day}T00:00:00' and bid_time < '{end}T00:00:00'",
        snapshot_id=snapshot_id,
        selected_fields=("order_id",),
    )
    return scan.to_arrow().num_rows


def day_partition_name(table, day: str) -> str:
    """The day's partition as Iceberg's summaries name it (``bid_time_day=2026-11-25``)."""
    found = day_field(table, table.spec().spec_id, "bid_time", "day")
    if found is None:
        raise Unknowable(f"{table.name()} is not partitioned by day(bid_time)")
    return f"{found[1]}={day}"


def orders_day_count(table, snapshot_id: int | None, day: str, memo: dict[str, int]) -> int:
    """The day's rows in orders at ``snapshot_id``: a remembered count further back plus the summaries' deltas
    (memo: ``"<snapshot>/<day>"`` -> rows, updated)."""
    if snapshot_id is None:
        return 0
    key = f"{snapshot_id}/{day}"
    if key in memo:
        return memo[key]
    partition = day_partition_name(table, day)
    chain = ancestry_of(table, snapshot_id)
    entries = [(s.snapshot_id, summary_of(s)) for s in chain]

    def known(sid: int) -> int | None:
        return memo.get(f"{sid}/{day}")

    def base(sid: int) -> int:
        rows = manifest_day_rows(table, sid, day)
        memo[f"{sid}/{day}"] = rows
        return rows

    reaches_start = bool(chain) and chain[-1].parent_snapshot_id is None
    result = count_along(entries, partition, known, base, reaches_start)
    memo[key] = result
    return result


def first_growth(table, head: int | None, read: int | None, day: str) -> float | None:
    """Epoch seconds of the oldest orders snapshot after ``read`` (up to ``head``) that added rows to the day:
    when the oldest order not summarised yet was committed (from snapshot timestamps, no data read)."""
    partition = day_partition_name(table, day)
    oldest = None
    for snapshot in ancestry_of(table, head):
        if snapshot.snapshot_id == read:
            break
        delta = partition_delta(summary_of(snapshot), partition)
        if delta is None or delta > 0:
            oldest = snapshot.timestamp_ms / 1000
    return oldest


def stats_day_sum(table, snapshot_id: int, day: str) -> int:
    """sum(total_count) of ``day`` in supplier_stats at a snapshot: the day's files only (partition pruning)."""
    import pyarrow.compute as pc

    scan = table.scan(row_filter=f"bid_date = '{day}'", snapshot_id=snapshot_id, selected_fields=("total_count",))
    total = pc.sum(scan.to_arrow()["total_count"]).as_py()
    return int(total or 0)


def changed_days(table, snapshot) -> dict[str, int]:
    """The days a supplier_stats snapshot changed -> net table rows it added there, from the entries of the
    manifests it wrote (files it added or removed); read once per snapshot (remembered)."""
    from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

    changed: dict[str, int] = {}
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        found = day_field(table, manifest.partition_spec_id, "bid_date", "identity")
        if found is None:
            raise Unknowable(f"{table.name()} spec {manifest.partition_spec_id} has no bid_date partition")
        pos, _ = found
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            # a manifest this snapshot wrote: its ADDED and DELETED entries are its own changes (a writer may keep
            # the adding snapshot's id on a DELETED entry, so the status says it, not the id)
            if entry.status == ManifestEntryStatus.EXISTING:
                continue
            value = entry.data_file.partition[pos]
            if value is None:
                continue
            day = date_of(value)
            sign = 1 if entry.status == ManifestEntryStatus.ADDED else -1
            if entry.data_file.content != DataFileContent.DATA:
                sign = -sign  # a delete file added removes rows
            changed[day] = changed.get(day, 0) + sign * entry.data_file.record_count
    return changed


@dataclass
class Memo:
    """Facts of one table kept in the CountStore between runs (all about immutable snapshots)."""

    stores: Stores
    kind: str
    values: dict[str, Any] = field(default_factory=dict)
    _before: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, stores: Stores, kind: str) -> Memo:
        raw = stores.counts.facts(kind)
        return cls(stores, kind, {k: json.loads(v) for k, v in raw.items()}, set(raw))

    def save(self, keep: Callable[[str], bool]) -> None:
        """Store the new facts and forget those ``keep`` no longer needs (a run's cost stays flat)."""
        new = {k: json.dumps(v) for k, v in self.values.items() if k not in self._before and keep(k)}
        if new:
            self.stores.counts.put_facts(self.kind, new)
        stale = [k for k in self.values if not keep(k) and k in self._before]
        if stale:
            self.stores.counts.drop_facts(self.kind, stale)
