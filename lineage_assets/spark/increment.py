"""Whether a supplier_stats run of a day may read only the orders appended since the day's last write, or must
recompute the whole day.

A day's totals are sums and counts, so the totals of the new orders add to the day's rows exactly. Iceberg's
incremental append scan (Spark's ``start-snapshot-id``, exclusive, and ``end-snapshot-id``, inclusive) reads only
the data files of ``append`` snapshots and silently skips every other snapshot, delete files included. So the run
reads incrementally only when every snapshot since its start point that touched the day appended to it; a delete,
overwrite or replace of the day, a start point that is no longer an ancestor (expired, rolled back), a write of the
day by another writer, or no earlier write of the day all mean the whole day again. Pure: the caller reads the
snapshots (pyiceberg) and the runs (Dagster).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lineage_assets.spark.day_commit import PROPERTY_PREFIX, cents_of, optional_id
from lineage_assets.spark.new_orders_sensor import (
    INCREMENTAL_MODE,
    PartitionSummaryMissing,
    SnapshotInfo,
    days_changed,
    snapshot_infos,
    snapshots_since,
)

FULL = "full"
INCREMENTAL = INCREMENTAL_MODE
MODES = (FULL, INCREMENTAL)


@dataclass(frozen=True)
class DayBase:
    """The day's last write by the Spark job: its supplier_stats snapshot, the orders snapshot it had read up to
    (None: the commit does not say), and its cumulative figures of the day (orders read, orders refused)."""

    snapshot_id: int
    input_snapshot_id: int | None
    input_rows: int = 0
    rejected: int = 0
    #: the refused orders' prices in cents (None: the commit does not say, written before it was recorded)
    rejected_cents: int | None = None


@dataclass(frozen=True)
class Decision:
    """How the run reads: ``start`` is the orders snapshot it reads after (exclusive) when incremental."""

    mode: str
    reason: str
    start: int | None = None


def choose_mode(
    day: str,
    field: str,
    wanted: str,
    base: DayBase | None,
    chain: Sequence[SnapshotInfo],
    end: int | None,
    foreign_write: str = "",
) -> Decision:
    """The mode of a run of ``day`` that asked for ``wanted`` and reads orders up to snapshot ``end``.

    ``chain``: the orders snapshots from ``end`` back to, not including, the base's input snapshot, oldest first
    (``new_orders_sensor.snapshots_since``); ``foreign_write``: what changed the day's supplier_stats rows after the
    base without being the Spark job ('' when nothing did); ``field``: the orders partition field of the day."""
    if wanted not in MODES:
        raise ValueError(f"mode {wanted!r} is neither of {MODES}")
    if wanted == FULL:
        return Decision(FULL, "the whole day was asked for")
    if base is None:
        return Decision(FULL, f"no earlier write of {day} by this job")
    if base.input_snapshot_id is None:
        return Decision(FULL, f"the last write of {day} (snapshot {base.snapshot_id}) does not say what it read")
    if foreign_write:
        return Decision(FULL, f"{day} was changed since its last write by {foreign_write}")
    start = base.input_snapshot_id
    if end == start:
        return Decision(INCREMENTAL, f"no orders snapshot since {start}", start)
    if not chain or chain[0].parent_id != start or chain[-1].snapshot_id != end:
        return Decision(
            FULL,
            f"orders snapshot {start}, read by the last write of {day}, is not an ancestor of {end} (expired or "
            "rolled back)",
        )
    for snapshot in chain:
        if snapshot.operation == "append":
            continue
        try:
            touched = day in days_changed(snapshot.summary, field)
        except PartitionSummaryMissing:
            touched = True
        if touched:
            return Decision(FULL, f"orders snapshot {snapshot.snapshot_id} ({snapshot.operation}) changed {day}")
    return Decision(INCREMENTAL, f"{len(chain)} orders snapshot(s) since {start}", start)


# --- reading the tables' metadata -------------------------------------------------------------------------------


def day_base(stats_table, day: str) -> tuple[DayBase | None, str]:
    """The day's last write by the Spark job along supplier_stats' current ancestry, and what else wrote the table
    since ('' when nothing did). A Spark write of another day replaces only that day (its overwrite filter), so it
    is passed over; a write without the job's properties may have touched any day, so it forces the whole day."""
    by_id = {s.snapshot_id: s for s in stats_table.metadata.snapshots}
    foreign = ""
    snapshot = stats_table.current_snapshot()
    while snapshot is not None:
        summary = dict(snapshot.summary.additional_properties) if snapshot.summary else {}
        written = summary.get(PROPERTY_PREFIX + "day")
        if written == day:
            base = DayBase(
                snapshot.snapshot_id,
                optional_id(summary.get(PROPERTY_PREFIX + "input-snapshot-id")),
                int(summary.get(PROPERTY_PREFIX + "input-rows", "0")),
                int(summary.get(PROPERTY_PREFIX + "rejected-orders", "0")),
                cents_of(summary.get(PROPERTY_PREFIX + "rejected-price")),
            )
            return base, foreign
        if written is None and not foreign:
            operation = snapshot.summary.operation.value if snapshot.summary else "unknown"
            foreign = f"snapshot {snapshot.snapshot_id} ({operation}, not written by this job)"
        snapshot = by_id.get(snapshot.parent_snapshot_id)
    return None, foreign


@dataclass(frozen=True)
class Plan:
    """A run's decision, the base it adds to (incremental only) and the supplier_stats snapshot current when it
    planned: the commit is validated against every change of the day since then."""

    decision: Decision
    base: DayBase | None
    validate_from: int | None


def plan(orders_table, stats_table, day: str, end: int | None, wanted: str) -> Plan:
    """How a run of ``day`` that reads orders up to snapshot ``end`` reads: the tables' snapshots, then
    ``choose_mode``."""
    current = stats_table.current_snapshot()
    validate_from = current.snapshot_id if current is not None else None
    if wanted != INCREMENTAL:
        return Plan(choose_mode(day, "", wanted, None, [], end), None, validate_from)
    base, foreign = day_base(stats_table, day)
    start = base.input_snapshot_id if base is not None else None
    chain = snapshots_since(snapshot_infos(orders_table), end, start) if start is not None else []
    field = orders_table.spec().fields[0].name
    decision = choose_mode(day, field, wanted, base, chain, end, foreign)
    return Plan(decision, base if decision.mode == INCREMENTAL else None, validate_from)
