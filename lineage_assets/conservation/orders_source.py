"""The orders-source hop: rows of PostgreSQL ``orders_source.public.orders`` -> records of Kafka ``orders``
(Debezium CDC under Connect's exactly-once source support: each poll's records and source offsets are one Kafka
transaction, read committed here; redeliveries are still recognised, for a worker run without that support or a
connector deployed by hand with ``exactly.once.support`` off).

Figures and where they come from:

- ``in``: ``SELECT count(*)`` of the table in one REPEATABLE READ snapshot S (the table is insert-only: the
  generator only inserts; an update or delete seen in ``pg_stat_user_tables`` makes the hop unknown, because a row
  count is then no longer a change count). One sequential scan (about 0.1 s at 1M rows), no per-run growth in work
  other than the table's size.
- ``out``: Debezium's records in ``orders``, counted once by an incremental scan (``KafkaCounter.scan``) and
  remembered (facts ``orders-source``), so the figure holds after retention deletes segments. A record is
  Debezium's when it carries Debezium's context header ``__debezium.context.connectorLogicalName`` (every record
  the connector wrote, before and after the SMT headers below existed) or the SMT's ``__op`` header. Records of
  transactions S cannot see yet (``__txId`` not visible in S) are delivered past the cut: not counted in ``out``.
- ``pending``: rows visible in S whose transaction Debezium has not delivered fully yet: per recent transaction
  (``xmin`` >= the remembered frontier), rows in S minus records with that ``__txId``. Rows count as pending only
  while Debezium has not passed the WAL position at which they were first seen committed (``pg_current_wal_insert_lsn``
  read in S); once it has (slot ``confirmed_flush_lsn`` or a delivered ``__lsn`` beyond it), they are missing.
- ``dead_letters``: 0, the connector has no dead-letter topic (a record it cannot convert stops the task).
- Other writers: records in ``orders`` without Debezium's headers (a foreign producer), counted in ``out`` like every
  hop's other writers (``HopBalance``'s contract: unaccepted, they show as duplicates) and named per batch
  (``foreign_records``): ``records:orders:<partition>@<first offset>``, up to ``<partition>@<last offset>,...``.
- Duplicates: ``in - out`` below zero. Redeliveries are also recognised as they are scanned: within a partition
  Debezium's records arrive in commit order, ordered by ``__sequence`` = [last commit LSN, change LSN]; a record
  at or below the highest order already seen (same order key: same order_id) is a re-sent change.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from lineage_assets.conservation import acceptances
from lineage_assets.conservation.balance import HopBalance, OtherWriter, StoreUnavailable
from lineage_assets.conservation.foreign_records import Batch, ForeignRecords, Run
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores

TOPIC = "orders"
TABLE = "public.orders"
SLOT = "orders_source"
#: Debezium's topic.prefix, which its context header names
LOGICAL_NAME = b"orders_source"
CONTEXT_HEADER = "__debezium.context.connectorLogicalName"
FACTS = "orders-source"
SCAN = "orders-source"
#: order_ids kept for the highest order key of a partition (many rows share one key only in a snapshot or COPY)
MAX_IDS_AT_KEY = 2000
#: offset ranges remembered per partition for naming other writers / redeliveries
MAX_RANGES = 20
_XID_SPAN = 1 << 32
#: xids live within this of each other
_XID_HALF_SPAN = _XID_SPAN // 2


# --- pure logic -------------------------------------------------------------------------------------------------


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


# --- reading the stores -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceCut:
    snapshot: Snapshot
    wal: int
    rows: int
    recent: dict[int, TxRows]
    stats: dict[str, int]
    slot_confirmed: int | None
    slot_active: bool | None


def _pg_unavailable(stores: Stores, exc: Exception) -> StoreUnavailable:
    host, port = stores.resources.source_db.host, stores.resources.source_db.port
    return StoreUnavailable(
        f"PostgreSQL at {host}:{port} (database orders_source) did not answer ({exc}); start it "
        "(`lineage-lab stack up postgres`) or check the source_db resource, then reconcile again"
    )


def _epoch(value: dt.datetime | None) -> float | None:
    return None if value is None else value.replace(tzinfo=dt.UTC).timestamp()


def read_source(stores: Stores, frontier: int | None) -> SourceCut:
    """One REPEATABLE READ snapshot: its xids, the WAL insert position, the row count and the rows per transaction
    at or above ``frontier`` (one scan of the table)."""
    try:
        with stores.source_db() as conn:
            conn.read_only = True
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with conn.transaction():
                snap_text, wal_text = conn.execute(
                    "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text"
                ).fetchone()
                snapshot = Snapshot.parse(snap_text)
                low = snapshot.xmin if frontier is None else frontier
                rows = conn.execute(
                    f"SELECT CASE WHEN age(xmin) <= age(%s::text::xid) THEN xmin::text::bigint END, count(*), "
                    f"min(bid_time) FROM {TABLE} GROUP BY 1",
                    (str(low & (_XID_SPAN - 1)),),
                ).fetchall()
                stats = conn.execute(
                    "SELECT n_tup_upd, n_tup_del FROM pg_stat_user_tables WHERE schemaname = 'public' "
                    "AND relname = 'orders'"
                ).fetchone() or (0, 0)
                slot = conn.execute(
                    "SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots WHERE slot_name = %s", (SLOT,)
                ).fetchone()
    except psycopg.Error as exc:
        raise _pg_unavailable(stores, exc) from exc
    total, recent = 0, {}
    for xid, count, since in rows:
        total += count
        if xid is not None:
            recent[widen(int(xid), snapshot.xmax)] = TxRows(count, _epoch(since))
    return SourceCut(
        snapshot,
        lsn_int(wal_text) or 0,
        total,
        recent,
        {"updated": int(stats[0]), "deleted": int(stats[1])},
        lsn_int(slot[0]) if slot else None,
        bool(slot[1]) if slot else None,
    )


def scan_topic(stores: Stores, tally: Tally, reference_xid: int) -> dict[int, tuple[int, int]]:
    """Count the records of ``orders`` not counted before into ``tally``; returns partition -> (log start, end)."""
    kafka = stores.kafka
    ranges = kafka.offsets(TOPIC)
    for partition, (log_start, _end) in ranges.items():
        p = str(partition)
        if p not in tally.positions:
            tally.positions[p] = log_start
            tally.uncounted_before[p] = log_start
        elif tally.positions[p] < log_start:
            raise StoreUnavailable(
                f"{TOPIC}[{p}]: retention deleted offsets {tally.positions[p]}..{log_start - 1} before they were "
                "counted; reconcile more often than the topic's retention deletes, or raise its retention.ms"
            )
        # the remembered tally is the authority: the scan resumes where the counts saved with it stopped
        stores.counts.set_scan_position(SCAN, TOPIC, partition, tally.positions[p])

    def handle(msg: Message) -> None:
        evidence = msg.offset() < ranges[msg.partition()][1]
        tally.add(msg.partition(), msg.offset(), msg.key(), classify(msg.headers()), reference_xid, evidence)

    reached = kafka.scan(SCAN, TOPIC, handle)
    tally.positions.update({str(p): o for p, o in reached.items()})
    return ranges


def deep_audit(stores: Stores, deep_range: dict[str, Any]) -> list[str]:
    """Per-key audit of a chosen offset range (``{"partition": p, "from": a, "to": b}``, or the last N records of
    each partition, ``{"last": N}``, default 10000): order_ids Debezium sent more than once, and order_ids the
    table does not hold."""
    ranges = stores.kafka.offsets(TOPIC)
    consumer = Consumer(
        stores.resources.kafka.connection().client_config(
            **{
                "group.id": "lineage-lab-reconcile-deep",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
    )
    ids: Counter[str] = Counter()
    spans = []
    try:
        for p, (log_start, end) in ranges.items():
            if "partition" in deep_range and int(deep_range["partition"]) != p:
                continue
            start = max(int(deep_range.get("from", end - int(deep_range.get("last", 10000)))), log_start)
            stop = min(int(deep_range.get("to", end)), end)
            if start >= stop:
                continue
            spans.append(f"{TOPIC}[{p}]@{start}..{stop - 1}")
            consumer.assign([TopicPartition(TOPIC, p, start)])
            while True:
                msg = consumer.poll(10)
                if msg is None:
                    raise StoreUnavailable(f"reading {TOPIC}[{p}] from {start} stalled for 10 s (deep audit)")
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise StoreUnavailable(f"reading {TOPIC}[{p}] failed: {msg.error()}")
                if msg.offset() >= stop:
                    break
                if classify(msg.headers()).debezium and msg.key():
                    ids[msg.key().decode("utf-8", "replace")] += 1
                if msg.offset() + 1 >= stop:
                    break
    except KafkaException as exc:
        raise StoreUnavailable(f"Kafka did not answer during the deep audit ({exc})") from exc
    finally:
        consumer.close()
    try:
        with stores.source_db() as conn:
            held = {r[0] for r in conn.execute(f"SELECT order_id FROM {TABLE} WHERE order_id = ANY(%s)", (list(ids),))}
    except psycopg.Error as exc:
        raise _pg_unavailable(stores, exc) from exc
    twice = sorted(k for k, n in ids.items() if n > 1)
    absent = sorted(set(ids) - held)
    return [
        f"deep audit of {' '.join(spans) or 'no records'}: {len(ids)} order_ids, {len(twice)} sent more than once"
        + (f" ({', '.join(twice[:5])}{' ...' if len(twice) > 5 else ''})" if twice else "")
        + f", {len(absent)} not in {TABLE}"
        + (f" ({', '.join(absent[:5])}{' ...' if len(absent) > 5 else ''})" if absent else "")
    ]


def balance(hop: Hop, stores: Stores) -> HopBalance:
    """The hop's balance at one snapshot of the source table (see the module docstring for each figure)."""
    tally = Tally.from_facts(stores.counts.facts(FACTS))
    tally.accepted = frozenset(acceptances.covered(stores.counts, hop.job.name))
    source = read_source(stores, tally.frontier)
    if tally.frontier is None:
        tally.frontier = source.snapshot.xmin
    ranges = scan_topic(stores, tally, source.snapshot.xmax)
    reached = max((v for v in (source.slot_confirmed, tally.lsn_max) if v is not None), default=None)
    settled = settle(
        source.snapshot, source.recent, tally.delivered, tally.first_seen, tally.debezium, source.wal, reached
    )
    if not tally.stats_baseline:
        tally.stats_baseline = dict(source.stats)
    changes = changed_rows(source.stats, tally.stats_baseline)
    if len(changes) < 2:  # statistics were reset: start counting updates and deletes again
        tally.stats_baseline = dict(source.stats)
        changes = {"updated": 0, "deleted": 0}
    tally.frontier, tally.delivered, tally.first_seen = settled.frontier, settled.delivered, settled.first_seen
    stores.counts.put_facts(FACTS, tally.to_facts())

    notes = [
        f"cut: one REPEATABLE READ snapshot of {TABLE} ({source.snapshot}, WAL insert position "
        f"{lsn_text(source.wal)}); then {TOPIC} scanned to its end; records of transactions the snapshot cannot "
        f"see are past the cut ({settled.beyond} now)",
        f"in: count(*) of {TABLE} (insert-only table); out: Debezium's records (context header or __op), ops "
        f"{json.dumps(tally.ops, sort_keys=True)}, and {tally.foreign.records} records of other writers",
        f"Debezium read the WAL up to {lsn_text(reached)} (slot {SLOT} confirmed_flush_lsn "
        f"{lsn_text(source.slot_confirmed)}, active {source.slot_active}; highest __lsn {lsn_text(tally.lsn_max)})",
        f"redeliveries recognised by __sequence order: {tally.redelivered}"
        + (f" at {describe_ranges(tally.redelivered_at)}" if tally.redelivered else ""),
    ]
    if settled.missing_txids:
        notes.append(
            f"transactions Debezium read past without delivering all their rows: "
            f"{', '.join(str(x) for x in settled.missing_txids)}"
        )
    if any(tally.uncounted_before.values()):
        notes.append(f"offsets below {tally.uncounted_before} were deleted before the first count (baseline)")
    if any(o.capped for o in tally.orders.values()):
        notes.append(f"more than {MAX_IDS_AT_KEY} rows share one change order: their redelivery is left to --deep")
    if stores.deep:
        notes.extend(deep_audit(stores, stores.deep_range))
    result = replace(
        counted(hop, source.rows, settled, tally),
        range={
            "source": f"{TABLE} at snapshot {source.snapshot} (WAL {lsn_text(source.wal)})",
            "topic": {str(p): [lo, tally.positions.get(str(p), lo)] for p, (lo, _hi) in ranges.items()},
            "debezium_reached_lsn": lsn_text(reached),
            "redelivered": tally.redelivered,
        },
        notes=tuple(notes),
    )
    if any(changes.values()):
        return result.unknown_because(
            f"{TABLE} saw {changes['updated']} updates and {changes['deleted']} deletes (pg_stat_user_tables) "
            "since counting began: count(*) counts rows, not the changes Debezium streams (deletes are dropped by "
            "the connector); audit the keys with `lineage-lab reconcile --deep`"
        )
    return result
