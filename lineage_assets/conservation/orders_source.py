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
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from confluent_kafka import Message

from lineage_assets.conservation import acceptances
from lineage_assets.conservation.balance import HopBalance, StoreUnavailable
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.key_audit_compare import describe_spans, examples, spans_of
from lineage_assets.conservation.source_tally import (
    _XID_SPAN,
    MAX_IDS_AT_KEY,
    TOPIC,
    Snapshot,
    Tally,
    TxRows,
    changed_rows,
    classify,
    counted,
    describe_ranges,
    lsn_int,
    lsn_text,
    settle,
    widen,
)
from lineage_assets.conservation.stores import Stores

TABLE = "public.orders"
SLOT = "orders_source"
FACTS = "orders-source"
SCAN = "orders-source"


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
    chosen = spans_of(deep_range, {p: end for p, (_, end) in ranges.items()}, {p: lo for p, (lo, _) in ranges.items()})
    ids: Counter[str] = Counter()
    consumer = stores.kafka.consumer()
    try:
        for msg in stores.kafka.records(consumer, TOPIC, chosen):
            if classify(msg.headers()).debezium and msg.key():
                ids[msg.key().decode("utf-8", "replace")] += 1
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
        f"deep audit of {describe_spans(TOPIC, chosen)}: {len(ids)} order_ids, {len(twice)} sent more than once"
        + examples(twice, len(twice))
        + f", {len(absent)} not in {TABLE}"
        + examples(absent, len(absent))
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
