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
from dataclasses import dataclass, replace
from typing import Any

from lineage_assets.conservation.balance import (
    HopBalance,
    OtherWriter,
    StoreUnavailable,
)
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.spark_day_figures import (
    REMATERIALIZE,
    BrokenChain,
    DayFigures,
    DayWrite,
    Unknowable,
    assemble,
    day_figures,
    parse_write,
    read_chain,
)
from lineage_assets.conservation.spark_day_reads import (
    Memo,
    ancestry_of,
    changed_days,
    first_growth,
    operation_of,
    orders_day_count,
    stats_day_sum,
    summary_of,
)
from lineage_assets.conservation.spark_day_values import (
    DayValues,
    Summed,
    day_values,
    hop_values,
    stats_day_cents,
)
from lineage_assets.conservation.stores import Stores


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
        return not self.by_spark and operation_of(self.snapshot) != "replace"

    def describe(self, day: str) -> str:
        when = dt.datetime.fromtimestamp(self.snapshot.timestamp_ms / 1000, dt.UTC).isoformat(timespec="seconds")
        engine = summary_of(self.snapshot).get("engine-name", "no engine named")
        return (
            f"snapshot {self.snapshot.snapshot_id} of default.supplier_stats ({operation_of(self.snapshot)} at {when}, "
            f"{engine}, no Spark application) changed day {day} by {self.rows:+d} table row(s)"
        )


def _changes(stats, touched_memo: Memo) -> tuple[dict[str, list[Change]], bool]:
    """day -> its changes in the current snapshot's retained ancestry, oldest first; and whether the ancestry
    reaches the table's first snapshot (else days written before the oldest retained one are not seen)."""
    chain = list(reversed(ancestry_of(stats, stats.metadata.current_snapshot_id)))
    by_day: dict[str, list[Change]] = {}
    for snapshot in chain:
        summary = summary_of(snapshot)
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
    prices: Memo,
    summed: Summed | None,
) -> tuple[DayFigures, DayValues | None]:
    spark = [i for i, c in enumerate(changes) if c.by_spark]
    if not spark:
        last = changes[-1].snapshot.snapshot_id
        return DayFigures(
            day, write_snapshot=last, unknown=f"no Spark write of it in the table's history; {REMATERIALIZE}"
        ), None
    latest = changes[spark[-1]]
    if latest.write is None:
        return DayFigures(
            day,
            write_snapshot=latest.snapshot.snapshot_id,
            unknown=f"written before lineage-lab recorded its input (snapshot {latest.snapshot.snapshot_id}); "
            + REMATERIALIZE,
        ), None

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
            ref = f"snapshot:{change.snapshot.snapshot_id}:{day}"
            claimed: tuple[tuple[str, int], ...] = ()
            if summed is not None:
                now, before = (
                    stats_day_cents(stats, s, day, summed.column) for s in (change.snapshot.snapshot_id, previous)
                )
                claimed = ((summed.column, now - before),)
            others.append(OtherWriter(output, what, orders_delta, ref, claimed=claimed))
        previous = change.snapshot.snapshot_id
    write = latest.write
    writes = [c.write if c.by_spark else None for c in changes[: spark[-1] + 1] if c.by_spark or c.foreign]
    try:
        reads = checked_reads(read_chain(writes), orders, day, counts)
    except BrokenChain as exc:
        return DayFigures(day, write_snapshot=write.snapshot_id, unknown=f"{exc}; {REMATERIALIZE}"), None
    in_read = orders_day_count(orders, write.input_snapshot, day, counts)
    in_now = orders_day_count(orders, orders_head, day, counts)
    since = first_growth(orders, orders_head, write.input_snapshot, day) if in_now > in_read else None
    figures = replace(day_figures(write, in_now, total(previous), in_read, tuple(others), since), reads=reads)
    if summed is None:
        return figures, None
    return figures, day_values(write, orders, stats, orders_head, previous, in_now > in_read, prices, summed)


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


def summed_of(hop: Hop) -> Summed | None:
    """The column the hop's output sums (the day values weigh one: the price), or None."""
    summed = hop.job.summed_columns(hop.output.key)
    return Summed(*next(iter(summed.items()))) if len(summed) == 1 else None


def balance(hop: Hop, stores: Stores) -> HopBalance:
    """The hop's balance over every day supplier_stats holds (see the module's docstring)."""
    orders_name, stats_name = hop.input.table_name, hop.output.table_name
    empty = HopBalance(hop.job.name, hop.input.qualified_name, hop.output_names)
    stats = stores.table(stats_name, missing_ok=True)  # first: its writes name the orders snapshots they read
    orders = stores.table(orders_name, missing_ok=True)
    if stats is None or orders is None:
        missing = stats_name if stats is None else orders_name
        return empty.unknown_because(f"table {missing} does not exist yet: materialize supplier_stats for a day")
    try:
        counts_memo = Memo.load(stores, f"spark_days.orders:{orders.metadata.table_uuid}")
        stats_memo = Memo.load(stores, f"spark_days.stats:{stats.metadata.table_uuid}")
        prices = Memo.load(stores, f"spark_days.prices:{orders.metadata.table_uuid}")
        summed = summed_of(hop)
        counts: dict[str, int] = dict(counts_memo.values)
        by_day, whole = _changes(stats, stats_memo)
        orders_head = orders.metadata.current_snapshot_id
        days, weighed = [], []
        for day, changes in by_day.items():
            try:
                found, values = _day(
                    day,
                    changes,
                    hop.output.qualified_name,
                    orders,
                    orders_head,
                    stats,
                    counts,
                    stats_memo,
                    prices,
                    summed,
                )
            except Unknowable as exc:
                found, values = DayFigures(day, unknown=f"{exc}; {REMATERIALIZE}"), None
            days.append(found)
            if summed is not None:
                weighed.append(values or DayValues(day, unknown=found.unknown or "not weighed"))
    except (StoreUnavailable, Unknowable):
        raise
    except Exception as exc:
        raise stores.catalog_unavailable("reading snapshots and manifests of orders and supplier_stats", exc) from exc
    heads = {
        "orders snapshot now": orders_head,
        "supplier_stats snapshot now": stats.metadata.current_snapshot_id,
    }
    result = assemble(hop, days, heads)
    if summed is not None:
        result = replace(result, values=(hop_values(weighed, summed),))
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
    # each data file's prices by its path (a file never changes); a day's at the snapshots still read
    prices.save(lambda k: k.startswith("file:") or k.split(":")[1] in wanted_counts)
    return result


def _with_note(b: HopBalance, note: str) -> HopBalance:
    return replace(b, notes=(*b.notes, note))
