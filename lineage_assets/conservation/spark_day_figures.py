"""The Spark hop's arithmetic (pure): what a Spark commit of a day says it read (its ``lineage-lab.*`` snapshot
properties), the chain of writes a day's rows are made of, a partition's rows walked along snapshot summaries, one
day's figures and the hop summed over its days."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from lineage_assets.conservation.balance import (
    HopBalance,
    OtherWriter,
    difference_of,
    duplicates_of,
    missing_of,
)
from lineage_assets.conservation.hops import Hop
from lineage_assets.spark.day_commit import NO_SNAPSHOT, PROPERTY_PREFIX, cents_of, optional_id

#: longest run of orders snapshots summed from their summaries before the manifests are read instead
MAX_WALK = 2000
#: what to do about a day whose figures cannot be known
REMATERIALIZE = "re-materialize supplier_stats for that day"


class Unknowable(Exception):
    """A figure the stores cannot give exactly (the message says why)."""


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
    #: the refused orders' prices in cents, cumulative (None: the commit does not say)
    rejected_cents: int | None = None


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
        rejected_cents=cents_of(summary.get(p + "rejected-price")),
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
