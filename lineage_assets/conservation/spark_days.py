"""The Spark hop (``dagster.supplier_stats``): Iceberg orders -> Iceberg supplier_stats, one day partition at a time.

Each Spark commit of a day says what it read (``lineage-lab.*`` snapshot properties, spark/supplier_stats_batch.py): the
day, the orders snapshot it read, the day's orders it read, the ones it refused. Per day supplier_stats holds:

- ``in``: the day's rows in orders now: those at the snapshot the latest Spark write of the day read ("orders
  read") and those committed since;
- ``out``: sum(total_count) of the day in supplier_stats now (the orders the day's rows summarise);
- ``dead_letters``: the refused orders of that write (``lineage-lab.rejected-orders``);
- ``pending``: the day's rows in orders now minus at the snapshot read (orders not summarised yet). Fewer rows now
  (orders removed since) is not pending: the day is counted against what was read and the removal is a note.

The cut: supplier_stats' metadata is loaded first, then orders'; every figure is read at a snapshot id named in
``range``, so the figures of one look are of fixed table versions, whatever commits while they are read.

Cheap and incremental: a day's orders count at a snapshot walks the orders snapshots back to the last one counted,
adding the per-partition ``added-records``/``deleted-records`` of their summaries (the table keeps partition
summaries, ``write.summary.partition-limit``); where a summary cannot say (no partition summaries, delete files), the
day's manifest entries are read (manifests pruned by their partition bounds: the day's files only, never a row).
A day of supplier_stats is summed once per snapshot that changed it; a snapshot's changed days are read once from
the manifests it wrote. Everything is remembered in the CountStore as facts about immutable snapshots.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lineage_assets.conservation.balance import (
    HopBalance,
    OtherWriter,
    StoreUnavailable,
    difference_of,
    duplicates_of,
    missing_of,
)
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores
from lineage_assets.spark.day_commit import NO_SNAPSHOT, PROPERTY_PREFIX, optional_id

#: longest run of orders snapshots summed from their summaries before the manifests are read instead
MAX_WALK = 2000
#: what to do about a day whose figures cannot be known
REMATERIALIZE = "re-materialize supplier_stats for that day"


class Unknowable(Exception):
    """A figure the stores cannot give exactly (the message says why)."""


# --- pure arithmetic --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DayWrite:
    """A Spark commit of one day, as its ``lineage-lab.*`` snapshot properties describe it."""

    snapshot_id: int
    day: str
    input_snapshot: int | None  # None: orders had no snapshot, nothing was read
    input_rows: int
    rejected: int
    output_rows: int
    committed_ms: int
    #: what this write itself read: full (the whole day) or incremental (orders appended after ``start_snapshot``,
    #: merged into the rows of supplier_stats snapshot ``base_snapshot``); writes before the mode was recorded
    #: were full
    mode: str = "full"
    start_snapshot: int | None = None
    base_snapshot: int | None = None
    read_rows: int = 0
    read_rejected: int = 0


def parse_write(snapshot_id: int, summary: Mapping[str, str], committed_ms: int) -> DayWrite | None:
    """The commit's record of what it read, or None when the commit carries none (not a lineage-lab Spark write)."""
    p = PROPERTY_PREFIX
    if p + "day" not in summary:
        return None
    source = summary.get(p + "input-snapshot-id", NO_SNAPSHOT)
    input_rows = int(summary.get(p + "input-rows", "0"))
    rejected = int(summary.get(p + "rejected-orders", "0"))
    return DayWrite(
        snapshot_id=snapshot_id,
        day=summary[p + "day"],
        input_snapshot=None if source == NO_SNAPSHOT else int(source),
        input_rows=input_rows,
        rejected=rejected,
        output_rows=int(summary.get(p + "output-rows", "0")),
        committed_ms=committed_ms,
        mode=summary.get(p + "mode", "full"),
        start_snapshot=optional_id(summary.get(p + "start-snapshot-id")),
        base_snapshot=optional_id(summary.get(p + "base-snapshot-id")),
        read_rows=int(summary.get(p + "read-rows", str(input_rows))),
        read_rejected=int(summary.get(p + "read-rejected", str(rejected))),
    )


class BrokenChain(Exception):
    """An incremental write whose base or start is not the write before it: what it added to cannot be known."""


def read_chain(writes: list[DayWrite | None]) -> tuple[list[DayWrite], bool]:
    """The writes the day's rows are made of, oldest first: back from the latest through its incremental writes to
    the full write they began from. ``writes``: the day's changes oldest first, ``None`` for another writer's (an
    incremental write on top of one is broken: the job reads the whole day after a foreign write). The flag says
    whether the chain reaches its full write (False: the history before it expired)."""
    chain = [writes[-1]]
    at = len(writes) - 1
    while chain[0] is not None and chain[0].mode == "incremental":
        link = chain[0]
        at -= 1
        if at < 0:
            return chain, False  # type: ignore[return-value]
        before = writes[at]
        if before is None:
            raise BrokenChain(f"supplier_stats snapshot {link.snapshot_id} added to the day after another writer's")
        if link.base_snapshot != before.snapshot_id or link.start_snapshot != before.input_snapshot:
            raise BrokenChain(
                f"supplier_stats snapshot {link.snapshot_id} says it added orders after snapshot {link.start_snapshot} "
                f"to supplier_stats snapshot {link.base_snapshot}, but the write before it is snapshot "
                f"{before.snapshot_id}, which read up to orders snapshot {before.input_snapshot}"
            )
        chain.insert(0, before)
    return chain, True  # type: ignore[return-value]


def partition_delta(summary: Mapping[str, str], partition: str) -> int | None:
    """Rows one snapshot added to (``>0``) or removed from ``partition`` (e.g. ``bid_time_day=2026-11-25``), from
    its summary alone; None when the summary cannot say exactly (no partition summaries; delete files, whose rows
    only a read can tell)."""
    if summary.get("partition-summaries-included") == "true":
        text = summary.get("partitions." + partition)
        if text is None:
            return 0
        values = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        if any(k.endswith("delete-files") or k.endswith("deletes") for k in values if values[k] not in ("0", "")):
            return None
        return int(values.get("added-records", "0")) - int(values.get("deleted-records", "0"))
    if summary.get("changed-partition-count") == "0":
        return 0
    if not any(k.startswith(("added-", "deleted-", "removed-")) for k in summary):
        return 0  # a commit that changed no file (the Flink sink's commit of an empty checkpoint)
    return None


def count_along(
    chain: list[tuple[int, Mapping[str, str]]],
    partition: str,
    known: Callable[[int], int | None],
    base: Callable[[int], int],
    reaches_start: bool,
    max_walk: int = MAX_WALK,
) -> int:
    """A partition's rows at the first snapshot of ``chain`` (snapshots newest first, each with its summary): a
    known count further back plus the summaries' deltas in between. ``base(snapshot)`` counts from the manifests
    where a summary cannot say, the walk is too long, or the chain ends at an expired parent; a chain that
    ``reaches_start`` (the table's first snapshot) starts from nothing."""
    added = 0
    for steps, (snapshot_id, summary) in enumerate(chain):
        remembered = known(snapshot_id)
        if remembered is not None:
            return remembered + added
        delta = partition_delta(summary, partition)
        last_retained = not reaches_start and steps == len(chain) - 1
        if delta is None or steps >= max_walk or last_retained:
            return base(snapshot_id) + added
        added += delta
    return added


@dataclass(frozen=True)
class DayFigures:
    """One day's balance: figures in orders (the day's rows), or ``unknown`` saying why not."""

    day: str
    in_: int | None = None
    out: int | None = None
    dead_letters: int | None = None
    pending: int | None = None
    #: orders of the day removed from the orders table since the snapshot read (not pending: never summarised)
    removed: int = 0
    #: the day's orders at the snapshot read (``in_`` less pending)
    read_rows: int | None = None
    read_snapshot: int | None = None
    write_snapshot: int | None = None
    other_writers: tuple[OtherWriter, ...] = ()
    pending_since: float | None = None
    unknown: str = ""
    #: what each write the day's rows are made of read, oldest first (``read_chain``), as the hop checked it
    reads: tuple[dict[str, Any], ...] = ()

    @property
    def difference(self) -> int | None:
        return difference_of(self.unknown, self.in_, self.out, self.dead_letters, self.pending)

    def as_range(self) -> dict[str, Any]:
        if self.unknown:
            return {"supplier_stats snapshot": self.write_snapshot, "unknown": self.unknown}
        d = self.difference
        entry = {
            "orders snapshot": self.read_snapshot,
            "supplier_stats snapshot": self.write_snapshot,
            "orders read": self.read_rows,
            "in": self.in_,
            "out": self.out,
            "dead_letters": self.dead_letters,
            "pending": self.pending,
            "missing": missing_of(d or 0),
            "duplicates": duplicates_of(d or 0),
        }
        if self.removed:
            entry["removed from orders since read"] = self.removed
        if self.reads:
            entry["reads"] = list(self.reads)
        return entry


def day_figures(
    write: DayWrite,
    in_now: int,
    out: int,
    in_read: int,
    others: tuple[OtherWriter, ...] = (),
    pending_since: float | None = None,
) -> DayFigures:
    """A day from its latest Spark write, the day's orders read at its snapshot (``in_read``) and now, and the
    orders its rows in supplier_stats sum now."""
    grown = in_now - in_read
    return DayFigures(
        day=write.day,
        # what came in: the day's orders now (those read and those since); rows removed since the read stay in
        in_=max(in_now, in_read),
        read_rows=in_read,
        out=out,
        dead_letters=write.rejected,
        pending=max(grown, 0),
        removed=max(-grown, 0),
        read_snapshot=write.input_snapshot,
        write_snapshot=write.snapshot_id,
        other_writers=others,
        pending_since=pending_since if grown > 0 else None,
    )


def assemble(hop: Hop, days: list[DayFigures], heads: Mapping[str, int | None]) -> HopBalance:
    """The hop summed over its days; a day that cannot be known makes the hop unknown (the known days' figures
    stay in ``range``), never a balance that leaves a day out."""
    base = HopBalance(hop.job.name, hop.input.qualified_name, hop.output_names)
    known = [d for d in days if not d.unknown]
    unknown = [d for d in days if d.unknown]
    notes = [
        "per day partition of supplier_stats: in = the day's orders in orders now, of which 'orders read' at the "
        "snapshot its latest Spark write read (that write's lineage-lab.input-snapshot-id) and pending = the rest "
        "(not summarised yet); out = sum(total_count) of the day now; dead letters = the write's "
        "lineage-lab.rejected-orders",
        "cut: supplier_stats' snapshot is read first, then orders'; every figure is of a snapshot named in range",
    ]
    for d in known:
        if d.removed:
            notes.append(
                f"day {d.day}: {d.removed} order(s) removed from orders since snapshot {d.read_snapshot} (the one "
                f"read): the day's summary still counts them; {REMATERIALIZE} to follow orders"
            )
        diff = d.difference or 0
        if diff > 0:
            notes.append(f"day {d.day}: {diff} order(s) missing in supplier_stats")
        if diff < 0:
            notes.append(f"day {d.day}: {-diff} order(s) doubled in supplier_stats")
    notes.extend(f"unknown for day {d.day}: {d.unknown}" for d in unknown)
    since = [d.pending_since for d in known if d.pending and d.pending_since is not None]
    figures = {
        "in_": sum(d.in_ or 0 for d in known),
        "out": sum(d.out or 0 for d in known),
        "dead_letters": sum(d.dead_letters or 0 for d in known),
        "pending": sum(d.pending or 0 for d in known),
    }
    balance = replace(
        base,
        **figures,
        range={**dict(heads), "days": {d.day: d.as_range() for d in sorted(days, key=lambda d: d.day)}},
        other_writers=tuple(w for d in known for w in d.other_writers),
        pending_since=min(since) if since else None,
        notes=tuple(notes),
    )
    if not days:
        return balance.unknown_because(
            "supplier_stats holds no day written by the Spark job yet: materialize supplier_stats for a day"
        )
    if unknown:
        return balance.unknown_because("; ".join(f"unknown for day {d.day}: {d.unknown}" for d in unknown))
    return balance


# --- Iceberg reads ------------------------------------------------------------------------------------------------


def _summary(snapshot) -> dict[str, str]:
    return dict(snapshot.summary.additional_properties) if snapshot is not None and snapshot.summary else {}


def _operation(snapshot) -> str:
    op = snapshot.summary.operation if snapshot.summary else None
    return getattr(op, "value", str(op or "?"))


def _ancestry(table, snapshot_id: int | None) -> list:
    """The snapshot and its retained ancestors, newest first."""
    chain = []
    current = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    while current is not None:
        chain.append(current)
        current = table.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id else None
    return chain


def _date(days: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=days)).isoformat()


def _day_field(table, spec_id: int, source: str, transform: str) -> tuple[int, str] | None:
    """(position, name) of the partition field deriving the day from ``source`` with ``transform`` in a spec."""
    spec = table.specs()[spec_id]
    column = table.schema().find_field(source).field_id
    for pos, f in enumerate(spec.fields):
        if f.source_id == column and str(f.transform) == transform:
            return pos, f.name
    return None


def _manifests_of_day(table, snapshot, day: str, source: str, transform: str):
    """(manifest, position of the day field) of the manifests that may hold ``day`` (pruned by their bounds)."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import DateType

    wanted = (dt.date.fromisoformat(day) - dt.date(1970, 1, 1)).days
    for manifest in snapshot.manifests(table.io):
        found = _day_field(table, manifest.partition_spec_id, source, transform)
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
    for manifest, pos, wanted in _manifests_of_day(table, snapshot, day, "bid_time", "day"):
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
    found = _day_field(table, table.spec().spec_id, "bid_time", "day")
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
    chain = _ancestry(table, snapshot_id)
    entries = [(s.snapshot_id, _summary(s)) for s in chain]

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
    for snapshot in _ancestry(table, head):
        if snapshot.snapshot_id == read:
            break
        delta = partition_delta(_summary(snapshot), partition)
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
        found = _day_field(table, manifest.partition_spec_id, "bid_date", "identity")
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
            day = _date(value)
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


# --- the hop ------------------------------------------------------------------------------------------------------


def _unavailable(stores: Stores, what: str, exc: Exception) -> StoreUnavailable:
    uri = getattr(stores.resources.iceberg, "uri", "the Iceberg REST catalog")
    return StoreUnavailable(
        f"Iceberg (REST catalog at {uri}, object store of its files) did not answer while {what} "
        f"({exc.__class__.__name__}: {exc}); start them (`lineage-lab stack status`, `lineage-lab stack up`) "
        "then reconcile again"
    )


def _load(stores: Stores, name: str):
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return stores.catalog.load_table(name)
    except NoSuchTableError:
        return None
    except Exception as exc:
        raise _unavailable(stores, f"loading table {name}", exc) from exc


@dataclass(frozen=True)
class Change:
    """A supplier_stats snapshot that changed a day: the Spark job's write (with or without its record of what
    it read) or another writer."""

    snapshot: Any
    write: DayWrite | None
    by_spark: bool
    rows: int  # table rows it added (>0) or removed on that day

    @property
    def foreign(self) -> bool:
        return not self.by_spark and _operation(self.snapshot) != "replace"

    def describe(self, day: str) -> str:
        when = dt.datetime.fromtimestamp(self.snapshot.timestamp_ms / 1000, dt.UTC).isoformat(timespec="seconds")
        engine = _summary(self.snapshot).get("engine-name", "no engine named")
        return (
            f"snapshot {self.snapshot.snapshot_id} of default.supplier_stats ({_operation(self.snapshot)} at {when}, "
            f"{engine}, no Spark application) changed day {day} by {self.rows:+d} table row(s)"
        )


def _changes(stats, touched_memo: Memo) -> tuple[dict[str, list[Change]], bool]:
    """day -> its changes in the current snapshot's retained ancestry, oldest first; and whether the ancestry
    reaches the table's first snapshot (else days written before the oldest retained one are not seen)."""
    chain = list(reversed(_ancestry(stats, stats.metadata.current_snapshot_id)))
    by_day: dict[str, list[Change]] = {}
    for snapshot in chain:
        summary = _summary(snapshot)
        write = parse_write(snapshot.snapshot_id, summary, snapshot.timestamp_ms)
        by_spark = "spark.app.id" in summary
        if write is not None:
            days = {write.day: write.output_rows}
        else:
            key = f"changed/{snapshot.snapshot_id}"
            if key not in touched_memo.values:
                touched_memo.values[key] = changed_days(stats, snapshot)
            days = touched_memo.values[key]
        for day, rows in days.items():
            by_day.setdefault(day, []).append(Change(snapshot, write, by_spark, rows))
    return by_day, bool(chain) and chain[0].parent_snapshot_id is None


def _day(
    day: str,
    changes: list[Change],
    output: str,
    orders,
    orders_head: int | None,
    stats,
    counts: dict[str, int],
    sums: Memo,
) -> DayFigures:
    spark = [i for i, c in enumerate(changes) if c.by_spark]
    if not spark:
        last = changes[-1].snapshot.snapshot_id
        return DayFigures(
            day, write_snapshot=last, unknown=f"no Spark write of it in the table's history; {REMATERIALIZE}"
        )
    latest = changes[spark[-1]]
    if latest.write is None:
        return DayFigures(
            day,
            write_snapshot=latest.snapshot.snapshot_id,
            unknown=f"written before lineage-lab recorded its input (snapshot {latest.snapshot.snapshot_id}); "
            + REMATERIALIZE,
        )

    def total(snapshot_id: int) -> int:
        key = f"sum/{snapshot_id}/{day}"
        if key not in sums.values:
            sums.values[key] = stats_day_sum(stats, snapshot_id, day)
        return sums.values[key]

    others = []
    previous = latest.snapshot.snapshot_id
    for change in changes[spark[-1] + 1 :]:
        if change.foreign:
            orders_delta = total(change.snapshot.snapshot_id) - total(previous)
            what = change.describe(day) + f": {orders_delta:+d} order(s)"
            others.append(OtherWriter(output, what, orders_delta, f"snapshot:{change.snapshot.snapshot_id}:{day}"))
        previous = change.snapshot.snapshot_id
    write = latest.write
    writes = [c.write if c.by_spark else None for c in changes[: spark[-1] + 1] if c.by_spark or c.foreign]
    try:
        reads = checked_reads(read_chain(writes), orders, day, counts)
    except BrokenChain as exc:
        return DayFigures(day, write_snapshot=write.snapshot_id, unknown=f"{exc}; {REMATERIALIZE}")
    in_read = orders_day_count(orders, write.input_snapshot, day, counts)
    in_now = orders_day_count(orders, orders_head, day, counts)
    since = first_growth(orders, orders_head, write.input_snapshot, day) if in_now > in_read else None
    return replace(day_figures(write, in_now, total(previous), in_read, tuple(others), since), reads=reads)


def checked_reads(found: tuple[list[DayWrite], bool], orders, day: str, counts: dict[str, int]):
    """Each write of the chain against the hop's own reading of orders: an incremental write read exactly the day's
    orders appended between its start and its end (appends only, or the job would have read the whole day), and
    the refused orders of the chain add up to the latest write's. A mismatch raises ``BrokenChain``."""
    chain, whole = found
    retained = {s.snapshot_id for s in orders.metadata.snapshots}
    reads = []
    for write in chain:
        entry = {
            "supplier_stats snapshot": write.snapshot_id,
            "mode": write.mode,
            "from": write.start_snapshot,
            "to": write.input_snapshot,
            "orders read": write.read_rows,
            "rejected": write.read_rejected,
        }
        if write.mode == "incremental":
            if {write.start_snapshot, write.input_snapshot} <= retained:
                own = orders_day_count(orders, write.input_snapshot, day, counts) - orders_day_count(
                    orders, write.start_snapshot, day, counts
                )
                if own != write.read_rows:
                    raise BrokenChain(
                        f"supplier_stats snapshot {write.snapshot_id} says it read {write.read_rows} order(s) of {day} "
                        f"appended after orders snapshot {write.start_snapshot} up to {write.input_snapshot}; orders "
                        f"holds {own} there"
                    )
            else:
                entry["not checked"] = "an orders snapshot it read between has expired"
        reads.append(entry)
    latest = chain[-1]
    refused = sum(w.read_rejected for w in chain)
    if whole and refused != latest.rejected:
        raise BrokenChain(
            f"the writes of {day} refused {refused} order(s) between them, but supplier_stats snapshot "
            f"{latest.snapshot_id} says {latest.rejected}"
        )
    return tuple(reads)


def balance(hop: Hop, stores: Stores) -> HopBalance:
    """The hop's balance over every day supplier_stats holds (see the module's docstring)."""
    orders_name, stats_name = hop.input.symlinks[0].name, hop.output.symlinks[0].name
    empty = HopBalance(hop.job.name, hop.input.qualified_name, hop.output_names)
    stats = _load(stores, stats_name)  # first: its writes name the orders snapshots they read
    orders = _load(stores, orders_name)
    if stats is None or orders is None:
        missing = stats_name if stats is None else orders_name
        return empty.unknown_because(f"table {missing} does not exist yet: materialize supplier_stats for a day")
    try:
        counts_memo = Memo.load(stores, f"spark_days.orders:{orders.metadata.table_uuid}")
        stats_memo = Memo.load(stores, f"spark_days.stats:{stats.metadata.table_uuid}")
        counts: dict[str, int] = dict(counts_memo.values)
        by_day, whole = _changes(stats, stats_memo)
        orders_head = orders.metadata.current_snapshot_id
        days = []
        for day, changes in by_day.items():
            try:
                days.append(
                    _day(day, changes, hop.output.qualified_name, orders, orders_head, stats, counts, stats_memo)
                )
            except Unknowable as exc:
                days.append(DayFigures(day, unknown=f"{exc}; {REMATERIALIZE}"))
    except (StoreUnavailable, Unknowable):
        raise
    except Exception as exc:
        raise _unavailable(stores, "reading snapshots and manifests of orders and supplier_stats", exc) from exc
    heads = {
        "orders snapshot now": orders_head,
        "supplier_stats snapshot now": stats.metadata.current_snapshot_id,
    }
    result = assemble(hop, days, heads)
    if not whole:
        result = _with_note(
            result,
            "supplier_stats' history is expired before its oldest retained snapshot: days written only before "
            "it are not in range",
        )
    # remember: counts at the snapshots still read (the writes' and the head), sums at the days' last changes
    wanted_counts = {f"{d.read_snapshot}/{d.day}" for d in days} | {f"{orders_head}/{d.day}" for d in days}
    wanted_counts |= {f"{r[k]}/{d.day}" for d in days for r in d.reads for k in ("from", "to")}
    counts_memo.values = counts
    counts_memo.save(lambda k: k in wanted_counts)
    retained = {str(s.snapshot_id) for s in stats.metadata.snapshots}
    stats_memo.save(lambda k: k.split("/")[1] in retained)
    return result


def _with_note(b: HopBalance, note: str) -> HopBalance:
    return replace(b, notes=(*b.notes, note))
