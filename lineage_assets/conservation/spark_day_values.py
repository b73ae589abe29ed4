"""The Spark hop's values: the column lineage says ``total_price`` sums ``price``, so per day partition

- ``in``: the price of the day's orders at the orders snapshot the latest Spark write of the day read, plus the
  price of those committed since (``pending``);
- ``out``: sum(total_price) of the day's rows in supplier_stats now;
- ``dead_letters``: the prices of the orders the writes refused, cumulative, as the commit records them
  (``lineage-lab.rejected-price``, spark/day_commit.py).

A day's orders are priced from the data files live at a snapshot (the day's manifests only, pruned by partition):
each file's prices are read once and remembered by its path (files never change), so a run reads only new files.
A difference names the day; a day written before the commits recorded the refused prices is unknown until it is
materialized again.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from lineage_assets.conservation.spark_day_figures import DayWrite, Unknowable
from lineage_assets.conservation.spark_day_reads import Memo, manifests_of_day
from lineage_assets.conservation.values import ValueBalance, text_of

#: the days a difference names at most
NAMED = 10


@dataclass(frozen=True)
class DayValues:
    day: str
    in_: int = 0
    out: int = 0
    dead_letters: int = 0
    pending: int = 0
    unknown: str = ""

    @property
    def difference(self) -> int:
        return self.in_ - self.out - self.dead_letters - self.pending


def decimal_cents(total: Decimal | int | None) -> int:
    return int(Decimal(total or 0).scaleb(2))


def file_cents(table, path: str, column: str) -> int:
    """A data file's ``column`` (a price) summed, in cents."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with table.io.new_input(path).open() as stream:
        prices = pq.ParquetFile(stream).read(columns=[column])[column]
    return decimal_cents(pc.sum(prices).as_py())


def orders_day_cents(table, snapshot_id: int | None, day: str, column: str, memo: Memo) -> int:
    """``column`` of ``day``'s orders at ``snapshot_id`` summed in cents, from its live data files (memo:
    ``file:<path>:<column>`` and ``day:<snapshot>/<day>:<column>`` -> cents, extended)."""
    from pyiceberg.manifest import DataFileContent

    if snapshot_id is None:
        return 0
    at = f"day:{snapshot_id}/{day}:{column}"  # a snapshot never changes: its day is priced once
    if at in memo.values:
        return memo.values[at]
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise Unknowable(f"orders snapshot {snapshot_id} has expired: its prices cannot be read")
    total = 0
    for manifest, pos, wanted in manifests_of_day(table, snapshot, day, "bid_time", "day"):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            data = entry.data_file
            if data.partition[pos] != wanted:
                continue
            if data.content != DataFileContent.DATA:
                raise Unknowable(f"orders has delete files for {day}: the prices of its rows are not weighed")
            key = f"file:{data.file_path}:{column}"
            if key not in memo.values:
                memo.values[key] = file_cents(table, data.file_path, column)
            total += memo.values[key]
    memo.values[at] = total
    return total


def stats_day_cents(table, snapshot_id: int, day: str, column: str) -> int:
    """sum(``column``) of ``day`` in supplier_stats at a snapshot, in cents (the day's files only)."""
    import pyarrow.compute as pc

    scan = table.scan(row_filter=f"bid_date = '{day}'", snapshot_id=snapshot_id, selected_fields=(column,))
    return decimal_cents(pc.sum(scan.to_arrow()[column]).as_py())


@dataclass(frozen=True)
class Summed:
    """The output column that sums an input column (the column lineage's ``sums``)."""

    column: str
    source: str


def day_values(
    write: DayWrite, orders, stats, orders_head: int | None, stats_snapshot: int, grown: bool, memo: Memo, s: Summed
) -> DayValues:
    """One day's values from its latest Spark write; ``grown``: the day has more orders now than were read (the
    counts say so), so the orders since are pending."""
    if write.rejected_cents is None:
        why = "written before the commits recorded the refused orders' prices (lineage-lab.rejected-price)"
        return DayValues(write.day, unknown=why)
    read = orders_day_cents(orders, write.input_snapshot, write.day, s.source, memo)
    pending = orders_day_cents(orders, orders_head, write.day, s.source, memo) - read if grown else 0
    out = stats_day_cents(stats, stats_snapshot, write.day, s.column)
    return DayValues(write.day, read + pending, out, write.rejected_cents, pending)


def hop_values(days: list[DayValues], s: Summed) -> ValueBalance:
    """The days summed into the hop's balance of the summed column; a day that differs is named."""
    column, source = s.column, s.source
    unknown = [d for d in days if d.unknown]
    if unknown:
        return ValueBalance(column, source, unknown="; ".join(f"day {d.day}: {d.unknown}" for d in unknown[:NAMED]))
    differ = [d for d in sorted(days, key=lambda d: d.day) if d.difference]
    where = tuple(
        f"day {d.day}: its orders' {source} {text_of(d.in_ - d.pending)} (refused {text_of(d.dead_letters)}), its "
        f"rows' {column} {text_of(d.out)}"
        for d in differ[:NAMED]
    ) + ((f"{len(differ) - NAMED} more days",) if len(differ) > NAMED else ())
    return ValueBalance(
        column,
        source,
        sum(d.in_ for d in days),
        sum(d.out for d in days),
        sum(d.dead_letters for d in days),
        sum(d.pending for d in days),
        where=where,
    )
