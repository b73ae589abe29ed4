"""orders-source's bookkeeping (pure): Debezium's records of ``orders`` classified by their headers (the connector's
context, ``__op``/``__lsn``/``__txId``/``__sequence``), the table snapshot's visibility of a transaction, redeliveries
told by commit order, and the tally of rows delivered, pending and foreign."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lineage_assets.conservation.balance import HopBalance, OtherWriter
from lineage_assets.conservation.foreign_records import Batch, ForeignRecords, Run
from lineage_assets.conservation.hops import Hop

TOPIC = "orders"
#: Debezium's topic.prefix, which its context header names
LOGICAL_NAME = b"orders_source"
CONTEXT_HEADER = "__debezium.context.connectorLogicalName"
#: order_ids kept for the highest order key of a partition (many rows share one key only in a snapshot or COPY)
MAX_IDS_AT_KEY = 2000
#: offset ranges remembered per partition for naming other writers / redeliveries
MAX_RANGES = 20
_XID_SPAN = 1 << 32
#: xids live within this of each other
_XID_HALF_SPAN = _XID_SPAN // 2


def lsn_int(text: str | None) -> int | None:
    """PostgreSQL's ``X/Y`` LSN text as the integer Debezium's ``__lsn`` header carries."""
    if not text:
        return None
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def lsn_text(value: int | None) -> str | None:
    return None if value is None else f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


@dataclass(frozen=True)
class RecordInfo:
    """What one ``orders`` record says about who wrote it."""

    debezium: bool
    op: str | None = None
    lsn: int | None = None
    txid: int | None = None  # 32-bit, as pgoutput reports it
    #: (last commit LSN, change LSN): Debezium's emission order (commit order, then WAL order in a transaction)
    order: tuple[int, int] | None = None


def classify(headers: Iterable[tuple[str, bytes | None]] | None) -> RecordInfo:
    """Debezium's records carry its context header (and, since the SMT's ``add.headers``, ``__op`` etc.)."""
    found = {k: v for k, v in headers or () if v is not None}
    debezium = found.get(CONTEXT_HEADER) == LOGICAL_NAME or "__op" in found
    if not debezium:
        return RecordInfo(False)

    def number(name: str) -> int | None:
        try:
            return int(found[name])
        except (KeyError, ValueError):
            return None

    order = None
    if "__sequence" in found:
        try:
            last_commit, lsn = json.loads(found["__sequence"])
            order = (int(last_commit or 0), int(lsn or 0))
        except (ValueError, TypeError):
            order = None
    op = found["__op"].decode(errors="replace") if "__op" in found else None
    return RecordInfo(True, op, number("__lsn"), number("__txId"), order)


def widen(xid: int, reference: int) -> int:
    """A 32-bit xid as the 64-bit one (epoch included) nearest to ``reference`` (a snapshot's xmax): xids live
    within 2**31 of each other, so this is right across an epoch boundary."""
    full = (reference & ~(_XID_SPAN - 1)) | (xid & (_XID_SPAN - 1))
    if full - reference > _XID_HALF_SPAN:
        return full - _XID_SPAN
    if reference - full > _XID_HALF_SPAN:
        return full + _XID_SPAN
    return full


@dataclass(frozen=True)
class Snapshot:
    """``pg_current_snapshot()``: xids below ``xmin`` are finished, from ``xmax`` on not yet, ``xip`` running."""

    xmin: int
    xmax: int
    xip: frozenset[int] = frozenset()

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def visible(self, xid8: int) -> bool:
        """Committed before the snapshot (Debezium only sends committed transactions)."""
        return xid8 < self.xmin or (xid8 < self.xmax and xid8 not in self.xip)

    def __str__(self) -> str:
        return f"{self.xmin}:{self.xmax}:{','.join(str(x) for x in sorted(self.xip))}"


@dataclass
class PartitionOrder:
    """The highest emission order seen in a partition and the order_ids seen at it."""

    key: tuple[int, int] | None = None
    ids: set[str] = field(default_factory=set)
    capped: bool = False

    def redelivered(self, key: tuple[int, int], order_id: str) -> bool:
        """True for a change already delivered: its order is below the highest seen, or equal with the same id."""
        if self.key is None or key > self.key:
            self.key, self.ids, self.capped = key, {order_id}, False
            return False
        if key < self.key:
            return True
        if order_id in self.ids:
            return True
        if len(self.ids) < MAX_IDS_AT_KEY:
            self.ids.add(order_id)
        else:
            self.capped = True  # rows sharing one order beyond the cap: their redelivery is left to --deep
        return False

    def as_json(self) -> dict[str, Any]:
        return {"key": list(self.key) if self.key else None, "ids": sorted(self.ids), "capped": self.capped}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> PartitionOrder:
        key = value.get("key")
        return cls(tuple(key) if key else None, set(value.get("ids", [])), bool(value.get("capped")))


def add_offset(ranges: list[list[int]], offset: int) -> None:
    """Append ``offset`` to [first, last] ranges, merging a consecutive one; the oldest are dropped past MAX_RANGES
    (the count stays exact, only the naming loses its oldest offsets)."""
    if ranges and ranges[-1][1] + 1 == offset:
        ranges[-1][1] = offset
    else:
        ranges.append([offset, offset])
    del ranges[:-MAX_RANGES]


def describe_ranges(by_partition: dict[str, list[list[int]]]) -> str:
    parts = []
    for p in sorted(by_partition, key=int):
        spans = ",".join(f"{a}" if a == b else f"{a}..{b}" for a, b in by_partition[p])
        if spans:
            parts.append(f"{TOPIC}[{p}]@{spans}")
    return " ".join(parts)


@dataclass(frozen=True)
class TxRows:
    """Rows of one recent transaction in the snapshot: how many, and the oldest bid_time (epoch seconds)."""

    rows: int
    since: float | None = None


@dataclass(frozen=True)
class Settled:
    out: int
    beyond: int  # delivered records of transactions the snapshot cannot see yet
    pending: int
    pending_since: float | None
    missing_txids: tuple[int, ...]  # transactions Debezium passed without delivering all their rows
    frontier: int
    delivered: dict[int, int]
    first_seen: dict[int, int]


def settle(
    snapshot: Snapshot,
    recent: dict[int, TxRows],
    delivered: dict[int, int],
    first_seen: dict[int, int],
    debezium_total: int,
    wal: int,
    reached: int | None,
) -> Settled:
    """The cut at ``snapshot``: ``out``, ``pending`` and what to remember.

    ``recent``: xid8 -> rows of transactions at or above the frontier visible in the snapshot; ``delivered``: xid8
    -> Debezium records carrying that ``__txId`` (transactions at or above the frontier); ``first_seen``: xid8 ->
    the WAL insert position when its rows were first seen undelivered (they committed before it); ``wal``: the WAL
    insert position read in the snapshot; ``reached``: how far Debezium is known to have read the WAL.
    """
    beyond = sum(n for x, n in delivered.items() if not snapshot.visible(x))
    pending, since, missing, still = 0, None, [], {}
    for x, tx in sorted(recent.items()):
        undelivered = tx.rows - delivered.get(x, 0)
        if undelivered <= 0:
            continue
        seen_at = first_seen.get(x, wal)
        if reached is not None and reached >= seen_at:
            missing.append(x)  # Debezium read past this transaction's commit without sending all of it
            continue
        pending += undelivered
        still[x] = seen_at
        if tx.since is not None:
            since = tx.since if since is None else min(since, tx.since)
    frontier = min([*still, snapshot.xmin])
    return Settled(
        out=debezium_total - beyond,
        beyond=beyond,
        pending=pending,
        pending_since=since,
        missing_txids=tuple(missing),
        frontier=frontier,
        delivered={x: n for x, n in delivered.items() if x >= frontier},
        first_seen=still,
    )


@dataclass
class Tally:
    """What the incremental scan of ``orders`` remembers (facts ``orders-source``)."""

    positions: dict[str, int] = field(default_factory=dict)  # partition -> next offset to scan
    debezium: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    foreign: ForeignRecords = field(default_factory=lambda: ForeignRecords(TOPIC))
    redelivered: int = 0
    redelivered_at: dict[str, list[list[int]]] = field(default_factory=dict)
    lsn_max: int | None = None
    orders: dict[str, PartitionOrder] = field(default_factory=dict)
    delivered: dict[int, int] = field(default_factory=dict)  # xid8 -> records, transactions >= frontier
    first_seen: dict[int, int] = field(default_factory=dict)
    frontier: int | None = None
    #: offsets below these were deleted by retention before the first scan (the baseline)
    uncounted_before: dict[str, int] = field(default_factory=dict)
    stats_baseline: dict[str, int] = field(default_factory=dict)
    #: highest __lsn of records past the ends read before the scan (evidence from the next run on)
    lsn_late: int | None = None
    #: refs of foreign batches accepted now (not remembered: the acceptances are): they take no more records
    accepted: frozenset[str] = frozenset()

    def add(
        self, partition: int, offset: int, key: bytes | None, info: RecordInfo, reference_xid: int, evidence: bool
    ) -> None:
        """Count one record; ``reference_xid``: the snapshot's xmax, to widen the record's 32-bit ``__txId``;
        ``evidence``: whether its ``__lsn`` may tell how far Debezium read (only records below the ends read once
        before the scan: every record Debezium sent before them is below the ends too, so the scan saw it)."""
        p = str(partition)
        if not info.debezium:
            self.foreign.add(partition, offset, 1, self.accepted)
            return
        self.debezium += 1
        op = info.op or "?"
        self.ops[op] = self.ops.get(op, 0) + 1
        if info.lsn is not None:
            if evidence:
                self.lsn_max = info.lsn if self.lsn_max is None else max(self.lsn_max, info.lsn)
            else:
                self.lsn_late = info.lsn if self.lsn_late is None else max(self.lsn_late, info.lsn)
        if info.txid is not None:
            x = widen(info.txid, reference_xid)
            if self.frontier is None or x >= self.frontier:
                self.delivered[x] = self.delivered.get(x, 0) + 1
        if info.order is not None:
            order_id = (key or b"").decode(errors="replace")  # UTF-8
            if self.orders.setdefault(p, PartitionOrder()).redelivered(info.order, order_id):
                self.redelivered += 1
                add_offset(self.redelivered_at.setdefault(p, []), offset)

    def to_facts(self) -> dict[str, str]:
        return {
            "positions": json.dumps(self.positions),
            "totals": json.dumps({"debezium": self.debezium, "ops": self.ops, "redelivered": self.redelivered}),
            "foreign_batches": json.dumps(self.foreign.as_json()),
            "redelivered_at": json.dumps(self.redelivered_at),
            "lsn_max": json.dumps(max((v for v in (self.lsn_max, self.lsn_late) if v is not None), default=None)),
            "orders": json.dumps({p: o.as_json() for p, o in self.orders.items()}),
            "delivered": json.dumps({str(x): n for x, n in self.delivered.items()}),
            "first_seen": json.dumps({str(x): w for x, w in self.first_seen.items()}),
            "frontier": json.dumps(self.frontier),
            "uncounted_before": json.dumps(self.uncounted_before),
            "stats_baseline": json.dumps(self.stats_baseline),
        }

    @classmethod
    def from_facts(cls, facts: dict[str, str]) -> Tally:
        def get(name: str, default: Any) -> Any:
            return json.loads(facts[name]) if name in facts else default

        totals = get("totals", {})
        return cls(
            positions=get("positions", {}),
            debezium=totals.get("debezium", 0),
            ops=totals.get("ops", {}),
            foreign=foreign_of(facts, totals.get("foreign", 0), get("foreign_at", {})),
            redelivered=totals.get("redelivered", 0),
            redelivered_at=get("redelivered_at", {}),
            lsn_max=get("lsn_max", None),
            orders={p: PartitionOrder.from_json(v) for p, v in get("orders", {}).items()},
            delivered={int(x): n for x, n in get("delivered", {}).items()},
            first_seen={int(x): w for x, w in get("first_seen", {}).items()},
            frontier=get("frontier", None),
            uncounted_before=get("uncounted_before", {}),
            stats_baseline=get("stats_baseline", {}),
        )


def foreign_of(facts: dict[str, str], legacy: int, legacy_at: dict[str, list[list[int]]]) -> ForeignRecords:
    """The remembered batches; a tally kept before batches were (a total and capped offset ranges) becomes one
    batch, its total exact (records whose ranges were dropped are put in the first partition named)."""
    if "foreign_batches" in facts:
        return ForeignRecords.from_json(TOPIC, json.loads(facts["foreign_batches"]))
    if not legacy:
        return ForeignRecords(TOPIC)
    runs = {int(p): Run(sum(b - a + 1 for a, b in r), 0, r[0][0], r[-1][1]) for p, r in legacy_at.items() if r}
    first = min(runs, default=0)
    runs.setdefault(first, Run(0, 0, 0, 0)).records += legacy - sum(r.records for r in runs.values())
    for run in runs.values():
        run.rows = run.records
    return ForeignRecords(TOPIC, [Batch(TOPIC, (first, runs[first].first), runs)])


def foreign_writers(output: str, foreign: ForeignRecords) -> tuple[OtherWriter, ...]:
    """One writer per batch of records without Debezium's headers."""
    return foreign.writers(
        output,
        lambda b: (
            f"{b.records} records produced by another writer (without Debezium's headers), {TOPIC} offsets {b.spans()}"
        ),
    )


def counted(hop: Hop, rows: int, settled: Settled, tally: Tally) -> HopBalance:
    """The hop's figures: ``out`` is Debezium's records at the cut plus every other writer's (the contract)."""
    return HopBalance(
        job=hop.job.name,
        input=hop.input.qualified_name,
        outputs=hop.output_names,
        in_=rows,
        out=settled.out + tally.foreign.rows,
        dead_letters=0,
        pending=settled.pending,
        other_writers=foreign_writers(hop.output.qualified_name, tally.foreign),
        pending_since=settled.pending_since,
    )


def changed_rows(stats: dict[str, int], baseline: dict[str, int]) -> dict[str, int]:
    """Updates and deletes since the baseline (statistics reset by a crash or pg_stat_reset re-baseline)."""
    return {k: stats[k] - baseline.get(k, stats[k]) for k in ("updated", "deleted") if stats[k] >= baseline.get(k, 0)}
