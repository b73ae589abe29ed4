"""supplier-stats' hop: Kafka ``orders`` -> per-supplier 5 s windows in ``supplier-stats`` + dead letters.

The job fires a window when its event-time clock passes the window's end and again for every order that arrives
within the allowed lateness, so a window can be written more than once: its LAST firing holds its count. The orders
a hop has taken in are those below the source group's committed offsets C (committed on each checkpoint, with the
sinks' Kafka transactions). So:

- ``in``: committed ``orders`` records below C (``KafkaCounter.count``, remembered marks).
- ``out``: the last ``count`` of every (window_start, supplier) the job wrote, read incrementally
  (``KafkaCounter.scan``) into a small book remembered in the ``CountStore`` (``WindowBook``). A window that can no
  longer fire is folded into a closed total: once the job has written a window ending at E, its clock had passed
  E, so a window ending at or before E - allowed lateness was already purged by Flink and fires no more.
  Records another producer wrote (no ``lineage-lab-writer: supplier-stats`` header) add the count they claim and
  are named as an ``OtherWriter`` per batch (``foreign_records``: ``records:supplier-stats:<partition>@<first
  offset>``, which ``reconcile --accept`` takes); acknowledged ones (``acknowledge_other_writers``, a repair that
  forgets them) are left out.
- ``dead_letters``: committed records of ``orders-dlq-supplier-stats``.
- ``pending``: orders below C whose window had not fired at the cut. Decided from the tail of ``orders`` only
  (records stamped after the oldest window that can still be open, found with ``offsets_for_times``): an order
  whose raw value is in the dead-letter tail is a dead letter; one whose window has a committed firing is out; one
  whose window ends at or before the event time known to have been reached before the cut is not pending (so a
  lost window shows as missing); the rest are pending. The tail is decoded once, incrementally (``TailBook``,
  remembered with the window book): each run decodes only the orders between where the last run stopped (at least
  the tail start) and C, and the dead letters past the last run's end, and keeps the orders that may still be
  pending (partition, offset, time, window, digest of the raw value) and the dead letters no such order matched
  yet. Each of these decisions is final (a window that fired, or that the known event time passed, never makes an
  order pending again; a match stays a match), so a run costs what arrived since the last one. C going back (a job
  restored from an older checkpoint) drops the orders past it, to be decoded again; retention deleting records
  not decoded yet makes the run read from the log start and say so; a lost count store costs one full tail read.

How the cut is taken: C, the output's end, the dead letters' end, C again, with the newest checkpoint read before
and after; taken again while anything moved, and after a wait while a checkpoint completed less than
``SETTLE_MS`` ago (its commits may be on their way), unless the cut sees exactly what the last settled cut saw
and that one left nothing pending (no commit of the new checkpoint is visible, so nothing is half-committed).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import fastavro
import requests
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from lineage_assets.conservation import acceptances
from lineage_assets.conservation.balance import HopBalance, OtherWriter, StoreUnavailable
from lineage_assets.conservation.foreign_records import Batch, ForeignRecords, Run
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores

#: as flink_jobs/supplier_stats_job.py sets them (a unit test holds the two equal)
WINDOW_MS = 5_000
OUT_OF_ORDERNESS_MS = 5_000
ALLOWED_LATENESS_MS = 5_000
WRITER_HEADER = "lineage-lab-writer"
WRITER = "supplier-stats"
#: the job's source consumer group (commits its offsets on each checkpoint)
GROUP = "supplier-stats"
#: the window operator, as Flink's REST API names its vertex
WINDOW_VERTEX = "per-supplier windows"
#: how far before the oldest open window the tail of orders is read, by record timestamp: an order stamped earlier
#: whose bid_time lies in an open window (placed more than this ahead of its record time) is not seen as pending
TAIL_SLACK_MS = 60_000
#: a checkpoint completed this recently may not have committed its offsets and transactions yet: wait
SETTLE_MS = 2_000
#: the facts kind (``CountStore``) of the window book, and the scan name
FACTS = "supplier-windows"
SCAN = "supplier-windows"
_CUT_ATTEMPTS = 6
_LONG_MIN = -(2**63)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4096)
def utc_text(ms: int) -> str:
    """The job's window bound format (OrderRule.utcText: seconds, UTC)."""
    return (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: str) -> int:
    return (
        int((datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) - _EPOCH) / timedelta(seconds=1)) * 1000
    )


def window_start(bid_ms: int) -> int:
    """Flink's tumbling window start (offset 0) of an event time."""
    return bid_ms - (bid_ms % WINDOW_MS)


def window_key(start: str, supplier: str) -> str:
    return f"{start}|{supplier}"


# The properties below call these: mutmut does not mutate a property, so their arithmetic lives here.
def window_end(start_ms: int) -> int:
    """The end (exclusive) of the tumbling window starting at ``start_ms``."""
    return start_ms + WINDOW_MS


def fired_through_of(newest_end: int | None) -> int | None:
    """The event time the job's clock had reached when it fired the window ending at ``newest_end``: Flink fires a
    window at its maxTimestamp, end - 1. None when nothing fired."""
    return None if newest_end is None else newest_end - 1


# --- the window book: pure bookkeeping of what the output topic holds -------------------------------------------


@dataclass(frozen=True)
class OutputRecord:
    """One committed record of the output topic, as far as the book needs it (``window_start`` None: unreadable)."""

    partition: int
    offset: int
    timestamp_ms: int
    headered: bool
    window_start: str | None = None
    window_end_ms: int = 0
    supplier: str = ""
    count: int = 0


def _spans_text(spans: dict[int, Run]) -> str:
    return ", ".join(f"{p}:{s.first}..{s.last}" for p, s in sorted(spans.items()) if s.records)


@dataclass
class WindowBook:
    """What the output topic holds of the job's windows, kept small: the last count of each window that can still
    fire, and one closed total for the windows that cannot. Serialized whole into one fact (one write, atomic with
    the positions it was read up to).

    Records without the writer header written before the first headered record (by record timestamp, any
    partition) are the job's own, from before it set the header; without a header after it, they are another
    producer's (``foreign``).
    """

    positions: dict[int, int] = field(default_factory=dict)
    windows: dict[str, list[int]] = field(default_factory=dict)  # key -> [count, window end ms]
    closed_count: int = 0
    closed_windows: int = 0
    #: windows ending at or before this were folded into the closed total
    closed_through_end: int | None = None
    newest_end: int | None = None
    header_since_ms: int | None = None
    legacy_records: int = 0
    #: firings of a window after it was closed (only a job restarted without its state does that): counts added
    reopened: int = 0
    unreadable: Run = field(default_factory=Run)
    foreign: ForeignRecords = field(default_factory=lambda: ForeignRecords(WRITER))
    acknowledged: dict[int, Run] = field(default_factory=dict)

    # the figures
    @property
    def job_out(self) -> int:
        return self.closed_count + sum(c for c, _ in self.windows.values())

    @property
    def foreign_rows(self) -> int:
        return self.foreign.rows

    @property
    def out(self) -> int:
        return self.job_out + self.foreign_rows

    @property
    def fired_through(self) -> int | None:
        """The event time the job's clock had reached when it wrote its newest window (end - 1: Flink fires at
        window.maxTimestamp)."""
        return fired_through_of(self.newest_end)

    def has_firing(self, key: str) -> bool:
        return key in self.windows

    # bookkeeping
    def add(self, records: list[OutputRecord], accepted: frozenset[str] = frozenset()) -> None:
        """Take newly read records (any partitions); within a partition in offset order (last firing wins).
        ``accepted``: refs of foreign batches accepted now (closed: later foreign records open a new one)."""
        headered = [r.timestamp_ms for r in records if r.headered]
        if self.header_since_ms is None and headered:
            self.header_since_ms = min(headered)
        for r in sorted(records, key=lambda r: (r.partition, r.offset)):
            after = r.offset + 1
            self.positions[r.partition] = max(self.positions.get(r.partition, after), after)
            legacy = not r.headered and (self.header_since_ms is None or r.timestamp_ms < self.header_since_ms)
            if not r.headered and not legacy:
                self.foreign.add(r.partition, r.offset, max(r.count, 0), accepted)
                continue
            if legacy:
                self.legacy_records += 1
            if r.window_start is None:
                self.unreadable.add(r.offset, 0)
                continue
            key = window_key(r.window_start, r.supplier)
            closed = self.closed_through_end is not None and r.window_end_ms <= self.closed_through_end
            if key not in self.windows and closed:
                self.reopened += 1
            self.windows[key] = [r.count, r.window_end_ms]
            self.newest_end = r.window_end_ms if self.newest_end is None else max(self.newest_end, r.window_end_ms)

    def prune(self) -> int:
        """Fold the windows that can no longer fire into the closed total; returns how many."""
        if self.newest_end is None:
            return 0
        bound = self.newest_end - ALLOWED_LATENESS_MS
        done = [k for k, (_, end) in self.windows.items() if end <= bound]
        for k in done:
            count, end = self.windows.pop(k)
            self.closed_count += count
            self.closed_windows += 1
            self.closed_through_end = end if self.closed_through_end is None else max(self.closed_through_end, end)
        return len(done)

    def acknowledge(self, through: dict[int, int] | None = None) -> dict[int, Run]:
        """Move foreign records (of every partition, or those with their last offset at or below ``through[p]``)
        to the acknowledged ones; a partition with foreign records past ``through`` raises (not all reviewed)."""
        held: dict[int, Run] = {}
        for batch in self.foreign.batches:
            for p, run in batch.runs.items():
                held.setdefault(p, Run()).merge(run)
        chosen = [p for p in held if through is None or p in through]
        for p in chosen:  # all or nothing
            if through is not None and held[p].last > through[p]:
                raise ValueError(
                    f"partition {p} holds foreign records up to offset {held[p].last}, past the {through[p]} "
                    "acknowledged: review them first"
                )
        for batch in self.foreign.batches:
            for p in chosen:
                batch.runs.pop(p, None)
        self.foreign.batches = [b for b in self.foreign.batches if b.runs]
        moved = {p: held[p] for p in chosen}
        for p, span in moved.items():
            self.acknowledged.setdefault(p, Run()).merge(span)
        return moved

    def other_writers(self, output: str, topic: str) -> tuple[OtherWriter, ...]:
        """One writer per batch of foreign records (see ``foreign_records``)."""
        return self.foreign.writers(
            output,
            lambda b: (
                f"{b.records} records without the job's writer header ({WRITER_HEADER}: {WRITER}), {topic} "
                f"offsets {b.spans()}"
            ),
        )

    # persistence
    def to_json(self) -> str:
        def spans(d: dict[int, Run]) -> dict[str, list[int]]:
            return {str(p): [s.records, s.rows, s.first, s.last] for p, s in d.items()}

        return json.dumps(
            {
                "positions": {str(p): o for p, o in self.positions.items()},
                "windows": self.windows,
                "closed": [self.closed_count, self.closed_windows, self.closed_through_end],
                "newest_end": self.newest_end,
                "header_since_ms": self.header_since_ms,
                "legacy_records": self.legacy_records,
                "reopened": self.reopened,
                "unreadable": [self.unreadable.records, 0, self.unreadable.first, self.unreadable.last],
                "foreign_batches": self.foreign.as_json(),
                "acknowledged": spans(self.acknowledged),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> WindowBook:
        if not text:
            return cls()
        d = json.loads(text)

        def spans(raw: dict[str, list[int]]) -> dict[int, Run]:
            return {int(p): Run(*v) for p, v in raw.items()}

        closed = d.get("closed") or [0, 0, None]
        return cls(
            positions={int(p): o for p, o in d.get("positions", {}).items()},
            windows={k: list(v) for k, v in d.get("windows", {}).items()},
            closed_count=closed[0],
            closed_windows=closed[1],
            closed_through_end=closed[2],
            newest_end=d.get("newest_end"),
            header_since_ms=d.get("header_since_ms"),
            legacy_records=d.get("legacy_records", 0),
            reopened=d.get("reopened", 0),
            unreadable=Run(*d["unreadable"]) if d.get("unreadable") else Run(),
            foreign=_foreign_of(d, spans(d.get("foreign", {}))),
            acknowledged=spans(d.get("acknowledged", {})),
        )


def _foreign_of(book: dict[str, Any], legacy: dict[int, Run]) -> ForeignRecords:
    """The remembered batches; a book kept before batches were (one span per partition) becomes one batch."""
    if "foreign_batches" in book:
        return ForeignRecords.from_json(WRITER, book["foreign_batches"])
    runs = {p: Run(s.records, s.rows, s.first, s.last) for p, s in legacy.items() if s.records}
    if not runs:
        return ForeignRecords(WRITER)
    first = min(runs)
    return ForeignRecords(WRITER, [Batch(WRITER, (first, runs[first].first), runs)])


# --- pending: the tail of orders against the book --------------------------------------------------------------


@dataclass(frozen=True)
class TailOrder:
    """A committed ``orders`` record below C in the tail (``supplier`` None: not an order Python can decode)."""

    partition: int
    offset: int
    timestamp_ms: int
    raw: bytes | None
    supplier: str | None = None
    bid_ms: int | None = None


@dataclass(frozen=True)
class Pending:
    orders: int
    since_ms: int | None
    #: window end (ms) -> pending orders in it
    windows: dict[int, int]


def digest(raw: bytes) -> str:
    """What the tail book keeps of an order's raw value to match it with its dead letter (16 bytes, hex)."""
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Candidate:
    """A decoded order below C whose window had no committed firing and ended after ``fired_through`` when it was
    read: pending until its window fires, its window's end passes ``fired_through`` (then it is out or missing) or
    its dead letter turns up."""

    partition: int
    offset: int
    timestamp_ms: int
    window_start_ms: int
    supplier: str
    digest: str

    @property
    def window_end_ms(self) -> int:
        return window_end(self.window_start_ms)

    @property
    def key(self) -> str:
        return window_key(utc_text(self.window_start_ms), self.supplier)


def _undecided(start_ms: int, supplier: str, book: WindowBook, fired_through: int | None) -> bool:
    """An order of this window can still be pending: the window ends after ``fired_through`` (one ending at or
    before it fired before the cut) and has no committed firing."""
    if fired_through is not None and window_end(start_ms) - 1 <= fired_through:
        return False
    return not book.has_firing(window_key(utc_text(start_ms), supplier))


@dataclass
class TailBook:
    """What the tail of ``orders`` (and of the dead letters) has told so far, so that each run decodes only the
    records that arrived since the last one: how far each partition was decoded, the orders that may still be
    pending (``candidates``) and the dead letters no candidate matched yet. Every decision it keeps is final: a
    window that fired (or that ``fired_through`` passed) never makes its orders pending again, and a matched dead
    letter stays matched. Serialized whole into one fact (``FACTS``/``tail``), saved once per reconciliation."""

    #: orders partition -> records below this offset were decoded (it follows C, also backwards)
    positions: dict[int, int] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    #: dead-letter partition -> records below this offset were read
    dlq_positions: dict[int, int] = field(default_factory=dict)
    #: dead letters not matched to a candidate: raw digest -> [(partition, offset)], oldest first
    dead: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: the highest ``fired_through`` a reconciliation used: the event time known to have fired stays known
    fired_through: int | None = None

    # where to read
    def resume(
        self, committed: dict[int, int], tail_starts: dict[int, int], log_starts: dict[int, int]
    ) -> tuple[dict[int, tuple[int, int]], list[str]]:
        """The orders to decode now, partition -> (from, to C), and notes. ``tail_starts``: partition -> the first
        offset of the tail (stamped at or after the tail start, at least the log start). Candidates at or past C
        (the job restored an older checkpoint: C went back) and before the tail start are dropped."""
        notes: list[str] = []
        ranges: dict[int, tuple[int, int]] = {}
        rewound = {
            p: (self.positions[p], c) for p, c in committed.items() if p in self.positions and self.positions[p] > c
        }
        if rewound:
            notes.append(
                "the group's committed offsets went back (a job restored from an older checkpoint or savepoint): "
                + ", ".join(f"orders[{p}] {was} -> {c}" for p, (was, c) in sorted(rewound.items()))
                + "; orders past them are decoded again when the job commits them again"
            )
        self.candidates = [
            c
            for c in self.candidates
            if c.partition in committed and tail_starts[c.partition] <= c.offset < committed[c.partition]
        ]
        for p, c in committed.items():
            position = self.positions.get(p)
            if position is not None and position < log_starts[p] and tail_starts[p] <= log_starts[p] < c:
                notes.append(
                    f"orders[{p}]: retention deleted offsets {position}..{log_starts[p] - 1} before the tail was "
                    "decoded; read from the log start"
                )
            start = tail_starts[p] if position is None else max(min(position, c), tail_starts[p])
            ranges[p] = (start, c)
        return ranges, notes

    def resume_dead(self, ends: dict[int, int], tail_starts: dict[int, int]) -> dict[int, tuple[int, int]]:
        """The dead letters to read now, partition -> (from, to their end); unmatched ones before the tail start
        are forgotten (the tail holds no order of theirs any more: keeps the set bounded)."""
        for d, where in list(self.dead.items()):
            kept = [(p, o) for p, o in where if p in tail_starts and o >= tail_starts[p]]
            if kept:
                self.dead[d] = kept
            else:
                del self.dead[d]
        ranges: dict[int, tuple[int, int]] = {}
        for p, end in ends.items():
            position = self.dlq_positions.get(p)
            # a position past the end: the topic was recreated; read its tail again
            start = tail_starts[p] if position is None or position > end else max(position, tail_starts[p])
            ranges[p] = (start, end)
        return ranges

    # what was read
    def take_dead(self, letters: list[tuple[int, int, str]]) -> None:
        """New dead letters (partition, offset, raw digest), in offset order; then the candidates they match (in
        offset order, as the orders arrived) are dead letters, not pending."""
        for p, o, d in letters:
            self.dead.setdefault(d, []).append((p, o))
        kept = []
        for c in sorted(self.candidates, key=lambda c: (c.partition, c.offset)):
            if not self._match(c.digest):
                kept.append(c)
        self.candidates = kept

    def _match(self, d: str) -> bool:
        where = self.dead.get(d)
        if not where:
            return False
        where.pop(0)
        if not where:
            del self.dead[d]
        return True

    def take_order(self, order: TailOrder, book: WindowBook, fired_through: int | None) -> None:
        """One newly decoded order below C (offset order within its partition)."""
        if order.raw is not None and self._match(digest(order.raw)):
            return
        if order.supplier is None or order.bid_ms is None:
            return  # the job dead-letters it; not being in the dead letters makes it missing
        start = window_start(order.bid_ms)
        if _undecided(start, order.supplier, book, fired_through):
            self.candidates.append(
                Candidate(
                    order.partition,
                    order.offset,
                    order.timestamp_ms,
                    start,
                    order.supplier,
                    digest(order.raw) if order.raw is not None else "",
                )
            )

    def settle(
        self,
        book: WindowBook,
        fired_through: int | None,
        committed: dict[int, int],
        dlq_ends: dict[int, int],
    ) -> None:
        """After the reads: positions at the cut, and candidates whose window fired or ended at or before
        ``fired_through`` dropped for good."""
        self.positions = dict(committed)
        self.dlq_positions = dict(dlq_ends)
        if fired_through is not None:
            self.fired_through = max(fired_through, self.fired_through or fired_through)
        self.candidates = [
            c for c in self.candidates if _undecided(c.window_start_ms, c.supplier, book, self.fired_through)
        ]

    def pending(self) -> Pending:
        windows: Counter[int] = Counter(c.window_end_ms for c in self.candidates)
        since = min((c.timestamp_ms for c in self.candidates), default=None)
        return Pending(len(self.candidates), since, dict(windows))

    # persistence
    def to_json(self) -> str:
        return json.dumps(
            {
                "positions": {str(p): o for p, o in self.positions.items()},
                "candidates": [
                    [c.partition, c.offset, c.timestamp_ms, c.window_start_ms, c.supplier, c.digest]
                    for c in self.candidates
                ],
                "dlq_positions": {str(p): o for p, o in self.dlq_positions.items()},
                "dead": {d: [list(w) for w in where] for d, where in self.dead.items()},
                "fired_through": self.fired_through,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> TailBook:
        if not text:
            return cls()
        d = json.loads(text)
        return cls(
            positions={int(p): o for p, o in d.get("positions", {}).items()},
            candidates=[Candidate(*c) for c in d.get("candidates", [])],
            dlq_positions={int(p): o for p, o in d.get("dlq_positions", {}).items()},
            dead={k: [(p, o) for p, o in v] for k, v in d.get("dead", {}).items()},
            fired_through=d.get("fired_through"),
        )


def tail_start_ms(fired_through: int | None) -> int | None:
    """The record timestamp the tail of orders (and of dead letters) is read from: the oldest window that can hold
    a pending order starts after ``fired_through - window``; records are stamped after their bid_time, less
    out-of-orderness, lateness and a slack for clocks. None: from the log start (nothing known yet)."""
    if fired_through is None:
        return None
    return max(fired_through - WINDOW_MS - OUT_OF_ORDERNESS_MS - ALLOWED_LATENESS_MS - TAIL_SLACK_MS, 0)


# --- decoding ---------------------------------------------------------------------------------------------------


class AvroValues:
    """Confluent wire-format Avro values decoded with their writer schema from the registry (one fetch per id)."""

    def __init__(self, registry) -> None:
        self.registry = registry
        self._schemas: dict[int, Any] = {}

    def decode(self, value: bytes | None) -> dict | None:
        """The record, or None when it is not wire format / does not decode (a bad record, not a store fault)."""
        if not value or len(value) < 5 or value[0] != 0:
            return None
        schema_id = int.from_bytes(value[1:5], "big")
        if schema_id not in self._schemas:
            try:
                found = self.registry.client().get_schema(schema_id)
            except Exception as exc:
                status = getattr(exc, "http_status_code", None)
                if status == 404:
                    self._schemas[schema_id] = None
                    return None
                raise StoreUnavailable(
                    f"the schema registry at {self.registry.url} did not answer for schema id {schema_id} ({exc}); "
                    "start it (`lineage-lab stack up schema-registry`) or check LINEAGE_LAB_SCHEMA_REGISTRY_*, "
                    "then reconcile again"
                ) from exc
            self._schemas[schema_id] = fastavro.parse_schema(json.loads(found.schema_str))
        schema = self._schemas[schema_id]
        if schema is None:
            return None
        try:
            record = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema)
        except Exception:
            return None
        return record if isinstance(record, dict) else None


def _millis(value: Any) -> int | None:
    if isinstance(value, datetime):
        return (value - _EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, int):
        return value
    return None


def output_record(msg: Message, avro: AvroValues) -> OutputRecord:
    """A supplier-stats record as the book needs it: the writer header, and the window when it reads (Avro as the
    job writes it; JSON as a hand-made record might be)."""
    headered = any(k == WRITER_HEADER and v == WRITER.encode() for k, v in (msg.headers() or []))
    value = msg.value()
    record = avro.decode(value)
    if record is None and value:
        try:
            loaded = json.loads(value)
            record = loaded if isinstance(loaded, dict) else None
        except (ValueError, UnicodeDecodeError):
            record = None
    base = OutputRecord(msg.partition(), msg.offset(), msg.timestamp()[1], headered)
    try:
        start, end = str(record["window_start"]), str(record["window_end"])
        supplier, count = str(record["supplier"]), int(record["count"])
        return OutputRecord(
            base.partition, base.offset, base.timestamp_ms, headered, start, parse_utc(end), supplier, count
        )
    except (TypeError, KeyError, ValueError):
        return base


def tail_order(msg: Message, avro: AvroValues) -> TailOrder:
    value = msg.value()
    record = avro.decode(value)
    supplier = record.get("supplier") if record else None
    bid = _millis(record.get("bid_time")) if record else None
    ok = isinstance(supplier, str) and bid is not None
    return TailOrder(
        msg.partition(), msg.offset(), msg.timestamp()[1], value, supplier if ok else None, bid if ok else None
    )


def dead_raw_value(msg: Message) -> bytes | None:
    """The raw order a dead letter carries (JSON, bytes as base64)."""
    try:
        raw = json.loads(msg.value() or b"null").get("raw_value")
        return base64.b64decode(raw) if isinstance(raw, str) else None
    except (ValueError, AttributeError):
        return None


# --- the stores -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    id: int
    trigger_ms: int
    ack_ms: int


class FlinkView:
    """What the reader needs of the running job over REST: its newest completed checkpoint and the window
    operator's input watermark."""

    def __init__(self, stores: Stores) -> None:
        self.client = stores.flink
        self.url = self.client.url

    def _get(self, path: str) -> Any:
        try:
            resp = requests.get(f"{self.url}{path}", timeout=self.client.timeout)
        except requests.RequestException as exc:
            raise self._unavailable(exc) from exc
        if resp.status_code >= 400:
            raise self._unavailable(f"GET {path}: HTTP {resp.status_code}")
        return resp.json()

    def _unavailable(self, exc: Any) -> StoreUnavailable:
        return StoreUnavailable(
            f"Flink's REST API at {self.url} did not answer ({exc}); start Flink (`lineage-lab stack up flink`) or "
            "point LINEAGE_LAB_EXTERNAL_FLINK at the cluster, then reconcile again"
        )

    def running_job(self) -> str | None:
        try:
            job = self.client.active(WRITER)
        except Exception as exc:
            raise self._unavailable(exc) from exc
        return job.jid if job is not None and job.state == "RUNNING" else None

    def checkpoint(self, jid: str) -> Checkpoint | None:
        latest = ((self._get(f"/jobs/{jid}/checkpoints").get("latest") or {}).get("completed")) or None
        if not latest:
            return None
        return Checkpoint(int(latest["id"]), int(latest["trigger_timestamp"]), int(latest["latest_ack_timestamp"]))

    def watermark(self, jid: str) -> int | None:
        """The window operator's input watermark (lowest of its subtasks); None when it has none yet."""
        vertices = self._get(f"/jobs/{jid}").get("vertices", [])
        vertex = next((v for v in vertices if v["name"].startswith(WINDOW_VERTEX)), None)
        if vertex is None:
            return None
        marks = [int(m["value"]) for m in self._get(f"/jobs/{jid}/vertices/{vertex['id']}/watermarks")]
        if not marks or min(marks) <= _LONG_MIN + 1:
            return None
        return min(marks)


@dataclass(frozen=True)
class Cut:
    committed: dict[int, int]  # orders partition -> C (log start when the group has none)
    output_end: dict[int, tuple[int, int]]
    dlq_end: dict[int, tuple[int, int]]
    checkpoint: Checkpoint | None
    steady: bool


def _now_ms() -> int:
    return int(time.time() * 1000)


def cut_key(cut: Cut) -> str:
    """What a cut saw, to tell next time whether anything moved since (JSON)."""
    return json.dumps(
        {
            "orders": {str(p): c for p, c in cut.committed.items()},
            "output": {str(p): end for p, (_, end) in cut.output_end.items()},
            "dead_letters": {str(p): end for p, (_, end) in cut.dlq_end.items()},
        },
        sort_keys=True,
    )


def take_cut(
    hop: Hop, stores: Stores, flink: FlinkView, jid: str | None, sleep=time.sleep, quiet: str | None = None
) -> Cut:
    """C, the output's end, the DLQ's end, C again (and the newest checkpoint around them); taken again while
    anything moved or a checkpoint has just completed (its commits may still be on their way). ``quiet``: the
    ``cut_key`` of an earlier settled cut that left nothing pending; a cut that sees exactly it again needs no
    settling (no commit of the new checkpoint is visible: it sees the same records as that cut, which balanced)."""
    topic = hop.input.name
    partitions = sorted(stores.kafka.offsets(topic))
    cut = None
    for _ in range(_CUT_ATTEMPTS):
        before = flink.checkpoint(jid) if jid else None
        settling = before is not None and _now_ms() - before.ack_ms < SETTLE_MS
        if settling and quiet is None:
            sleep((SETTLE_MS - (_now_ms() - before.ack_ms)) / 1000)
            continue
        c1 = stores.kafka.committed(topic, GROUP, partitions)
        out = stores.kafka.offsets(hop.output.name)
        dlq = stores.kafka.offsets(hop.dead_letters.name) if hop.dead_letters else {}
        c2 = stores.kafka.committed(topic, GROUP, partitions)
        after = flink.checkpoint(jid) if jid else None
        steady = c1 == c2 and before == after
        found = Cut({p: max(o, 0) for p, o in c2.items()}, out, dlq, after, steady)
        if settling and not (steady and cut_key(found) == quiet):
            sleep(max(SETTLE_MS - (_now_ms() - before.ack_ms), 0) / 1000)
            continue
        cut = found
        if steady:
            return cut
        sleep(0.5)
    if cut is None:  # every attempt waited for a checkpoint to settle: take one anyway
        c = stores.kafka.committed(topic, GROUP, partitions)
        cut = Cut(
            {p: max(o, 0) for p, o in c.items()},
            stores.kafka.offsets(hop.output.name),
            stores.kafka.offsets(hop.dead_letters.name) if hop.dead_letters else {},
            flink.checkpoint(jid) if jid else None,
            False,
        )
    return cut


def _consumer(stores: Stores) -> Consumer:
    """Reads up to known end offsets: a partition ending in a transaction marker is only done at its end-of-
    partition event, which a fetch waiting for more data (500 ms by default) would hold back."""
    return Consumer(
        stores.kafka.connection.client_config(
            **{
                "group.id": f"lineage-lab-reconcile-{SCAN}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 20,
            }
        )
    )


def _kafka_unavailable(stores: Stores, where: str, exc: Any) -> StoreUnavailable:
    return StoreUnavailable(
        f"Kafka at {stores.kafka.connection.bootstrap} did not answer while {where} ({exc}); start the broker "
        "(`lineage-lab stack up kafka`), then reconcile again"
    )


def tail_starts(
    stores: Stores, consumer: Consumer, topic: str, ranges: dict[int, tuple[int, int]], since_ms: int | None
) -> dict[int, int]:
    """partition -> the first offset of ``topic``'s tail: stamped at or after ``since_ms`` (None: the log start),
    at least the log start; the end when no record is stamped that late. ranges: partition -> (log start, end)."""
    starts = {p: lo for p, (lo, _) in ranges.items()}
    if since_ms is None or not ranges:
        return starts
    try:
        timed = consumer.offsets_for_times(
            [TopicPartition(topic, p, since_ms) for p in ranges], timeout=stores.kafka.timeout
        )
    except KafkaException as exc:
        raise _kafka_unavailable(stores, f"finding {topic}'s records stamped from {utc_text(since_ms)}", exc) from exc
    for tp in timed:
        lo, end = ranges[tp.partition]
        starts[tp.partition] = end if tp.offset < 0 else max(tp.offset, lo)
    return starts


def read_ranges(
    stores: Stores, consumer: Consumer, topic: str, ranges: dict[int, tuple[int, int]]
) -> Iterator[Message]:
    """Committed records of ``topic``, partition -> [from, to) offsets, in offset order per partition."""
    for p, (start, end) in sorted(ranges.items()):
        if start >= end:
            continue
        where = f"reading {topic}[{p}] offsets {start}..{end - 1}"
        try:
            consumer.assign([TopicPartition(topic, p, start)])
            quiet_since = time.monotonic()
            done = False
            while not done:
                batch = consumer.consume(1000, timeout=0.2)
                if not batch and time.monotonic() - quiet_since > 15:
                    raise StoreUnavailable(
                        f"Kafka at {stores.kafka.connection.bootstrap} stalled while {where}; check the broker "
                        "(`lineage-lab stack status`), then reconcile again"
                    )
                for msg in batch:
                    quiet_since = time.monotonic()
                    err = msg.error()
                    if err is not None and err.code() == KafkaError._PARTITION_EOF:
                        done = True
                        break
                    if err is not None:
                        raise StoreUnavailable(f"Kafka at {stores.kafka.connection.bootstrap}: {err} while {where}")
                    if msg.offset() >= end:
                        done = True
                        break
                    yield msg
                    if msg.offset() + 1 >= end:
                        done = True
                        break
        except KafkaException as exc:
            raise _kafka_unavailable(stores, where, exc) from exc


@dataclass(frozen=True)
class TailRead:
    """What one run decoded of the tails (the work a run does beyond a few requests: it follows what is new)."""

    orders: int
    dead_letters: int
    order_ranges: dict[int, tuple[int, int]]
    notes: list[str]


def advance_tail(
    hop: Hop,
    stores: Stores,
    cut: Cut,
    tail: TailBook,
    book: WindowBook,
    fired_through: int | None,
    avro: AvroValues,
) -> TailRead:
    """Bring ``tail`` up to the cut: decode the orders from where it stood (or the tail start) to C and the dead
    letters past its position, then settle its candidates against ``book`` and ``fired_through``."""
    since = tail_start_ms(fired_through)
    log_starts = {p: lo for p, (lo, _) in stores.kafka.offsets(hop.input.name).items()}
    missing = sorted(set(cut.committed) - set(log_starts))
    if missing:
        raise StoreUnavailable(f"{hop.input.name} has no partitions {missing} on {stores.kafka.connection.bootstrap}")
    consumer = _consumer(stores)
    try:
        input_range = {p: (log_starts[p], c) for p, c in cut.committed.items()}
        order_starts = tail_starts(stores, consumer, hop.input.name, input_range, since)
        ranges, notes = tail.resume(cut.committed, order_starts, log_starts)
        letters: list[tuple[int, int, str]] = []
        if hop.dead_letters:
            dlq_starts = tail_starts(stores, consumer, hop.dead_letters.name, cut.dlq_end, since)
            dlq_ranges = tail.resume_dead({p: end for p, (_, end) in cut.dlq_end.items()}, dlq_starts)
            for msg in read_ranges(stores, consumer, hop.dead_letters.name, dlq_ranges):
                raw = dead_raw_value(msg)
                if raw is not None:
                    letters.append((msg.partition(), msg.offset(), digest(raw)))
        tail.take_dead(letters)
        decoded = 0
        for msg in read_ranges(stores, consumer, hop.input.name, ranges):
            tail.take_order(tail_order(msg, avro), book, fired_through)
            decoded += 1
    finally:
        consumer.close()
    tail.settle(book, fired_through, cut.committed, {p: end for p, (_, end) in cut.dlq_end.items()})
    return TailRead(decoded, len(letters), ranges, notes)


def read_book(hop: Hop, stores: Stores, cut: Cut, avro: AvroValues) -> WindowBook:
    """The remembered book brought up to the cut's output end (new records only), pruned and saved."""
    topic = hop.output.name
    book = WindowBook.from_json(stores.counts.facts(FACTS).get("book"))
    for p, (log_start, _) in cut.output_end.items():
        position = book.positions.get(p)
        if position is not None and position < log_start:
            raise StoreUnavailable(
                f"{topic}[{p}]: retention deleted offsets {position}..{log_start - 1} before the reconciliation "
                "read them; run reconcile more often than the topic's retention deletes, or increase its retention.ms"
            )
        # the book is the truth of what was read: the scan resumes where the book stands
        stores.counts.set_scan_position(SCAN, topic, p, position if position is not None else log_start)
    seen: list[OutputRecord] = []

    def handle(msg: Message) -> None:
        if msg.offset() < cut.output_end[msg.partition()][1]:  # past the cut: read again next time
            seen.append(output_record(msg, avro))

    stores.kafka.scan(SCAN, topic, handle)
    book.add(seen, frozenset(acceptances.covered(stores.counts, hop.job.name)))
    for p, (log_start, end) in cut.output_end.items():
        book.positions[p] = max(book.positions.get(p, log_start), end)
        stores.counts.set_scan_position(SCAN, topic, p, book.positions[p])
    book.prune()
    stores.counts.put_facts(FACTS, {"book": book.to_json()})
    return book


def acknowledge_other_writers(stores: Stores, through: dict[int, int] | None = None) -> list[OtherWriter]:
    """The repair of records another producer put into supplier-stats (Kafka cannot delete them from the middle of
    a partition): once a person has dealt with them (stopped the producer, told the consumers), they are
    acknowledged here and no longer counted nor named; later foreign records are again. ``through``: partition ->
    the last offset reviewed (a partition holding foreign records past it refuses); None: all named so far."""
    book = WindowBook.from_json(stores.counts.facts(FACTS).get("book"))
    moved = book.acknowledge(through)
    stores.counts.put_facts(FACTS, {"book": book.to_json()})
    return [OtherWriter(WRITER, f"acknowledged offsets {_spans_text({p: s})}", s.rows) for p, s in moved.items()]


class _Steps:
    """Seconds per step of a reconciliation, for the log (where a slow run spends its time)."""

    def __init__(self) -> None:
        self.laps: list[tuple[str, float]] = []
        self._at = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self._at))
        self._at = now

    def __str__(self) -> str:
        total = sum(s for _, s in self.laps)
        return f"{total:.2f} s (" + ", ".join(f"{n} {s:.2f} s" for n, s in self.laps) + ")"


def balance(hop: Hop, stores: Stores, sleep=time.sleep) -> HopBalance:
    """supplier-stats' balance at one cut (see the module doc)."""
    steps = _Steps()
    flink = FlinkView(stores)
    avro = AvroValues(stores.resources.kafka.registry())
    jid = flink.running_job()
    t0 = _now_ms()
    w0 = flink.watermark(jid) if jid else None
    remembered = stores.counts.facts(FACTS)
    # the watermark an earlier reconciliation read (of the same Flink job): it bounds what fired before any
    # checkpoint triggered after it, so a cut need not wait for a checkpoint after w0 to know the tail is short
    earlier = json.loads(remembered.get("watermark") or "null")
    # what earlier runs decoded of the tail; brought up to each attempt's cut in turn (every decision it keeps is
    # final, so a second attempt goes on from the first one's state and adds nothing twice), saved once at the end
    tail = TailBook.from_json(remembered.get("tail"))
    steps.lap("flink, remembered facts")
    tail_notes: list[str] = []
    decoded = dead_read = 0
    for attempt in range(2):
        cut = take_cut(hop, stores, flink, jid, sleep, remembered.get("quiet_cut") or None)
        steps.lap("cut")
        book = read_book(hop, stores, cut, avro)
        steps.lap("window book")
        # the event time the clock had surely reached before the cut's checkpoint: the newest window written (its
        # firing is committed), the watermark read before that checkpoint was triggered, and what an earlier run
        # knew (it stays true)
        before_cut = w0 if cut.checkpoint and cut.checkpoint.trigger_ms > t0 else None
        if before_cut is None and earlier and earlier["jid"] == jid and cut.checkpoint:
            before_cut = earlier["w"] if cut.checkpoint.trigger_ms > earlier["t"] else None
        fired_through = max(
            (t for t in (book.fired_through, before_cut, tail.fired_through) if t is not None), default=None
        )
        since = tail_start_ms(fired_through)
        read = advance_tail(hop, stores, cut, tail, book, fired_through, avro)
        decoded, dead_read = decoded + read.orders, dead_read + read.dead_letters
        tail_notes += [n for n in read.notes if n not in tail_notes]
        pending = tail.pending()
        steps.lap("tail")
        now_mark = flink.watermark(jid) if jid else None
        # a pending window the clock has passed may have fired after the checkpoint (its output not committed yet)
        # or be lost: one checkpoint triggered after w0 was read tells (then w0 bounds what fired before it)
        doubtful = now_mark is not None and any(end - 1 <= now_mark for end in pending.windows)
        if attempt or not doubtful or (cut.checkpoint and cut.checkpoint.trigger_ms > t0):
            break
        _wait_for_checkpoint_after(flink, jid, t0, sleep)
        steps.lap("wait for a checkpoint")
    # a settled cut that left nothing pending: seeing it unchanged next time needs no wait for a checkpoint to settle
    quiet = cut.steady and pending.orders == 0 and not doubtful
    saved = {"tail": tail.to_json(), "quiet_cut": cut_key(cut) if quiet else ""}
    if jid and w0 is not None:
        saved["watermark"] = json.dumps({"jid": jid, "w": w0, "t": t0})
    stores.counts.put_facts(FACTS, saved)
    ins = stores.kafka.count(hop.input.name, {p: [c] for p, c in cut.committed.items()})
    dlq = stores.kafka.count(hop.dead_letters.name, {p: [end] for p, (_, end) in cut.dlq_end.items()})
    steps.lap("save, in and dead-letter counts")
    log.info(
        "supplier-stats reconciled in %s; decoded %d orders (%s) and %d dead letters, %d candidates, %d unmatched "
        "dead letters remembered",
        steps,
        decoded,
        _spans_text({p: Run(1, 0, lo, hi - 1) for p, (lo, hi) in read.order_ranges.items() if hi > lo}) or "none",
        dead_read,
        len(tail.candidates),
        sum(len(w) for w in tail.dead.values()),
    )
    notes = [
        f"cut: checkpoint {cut.checkpoint.id if cut.checkpoint else '-'}; the group's committed offsets C read "
        "before and after the output's and dead letters' ends"
        + (" (unchanged)" if cut.steady else " (still moving after retries: figures may be one checkpoint apart)"),
        "in: committed orders below C; out: the last count of each (window_start, supplier) the job wrote "
        f"({book.closed_windows} closed windows folded into {book.closed_count}, {len(book.windows)} windows open) "
        "plus the counts claimed by other producers' records",
        "pending: orders below C (tail read from "
        + (utc_text(since) if since is not None else "the log start")
        + ") in windows with no committed firing ending after event time "
        + (utc_text(fired_through) if fired_through is not None else "- (nothing fired yet)")
        + "; dead letters matched by raw value. The tail is decoded once: each run reads only the orders and dead "
        "letters past the positions remembered, and keeps the orders that may still be pending",
        *tail_notes,
    ]
    if jid is None:
        notes.append(
            "the job is not running: no watermark; windows not written yet count as pending (they fire when it "
            "resumes from its checkpoint), so a window lost after the newest one written cannot be told yet"
        )
    elif doubtful:
        notes.append(
            "some pending windows are behind the job's clock: they fired after the last checkpoint or were lost; "
            "the next checkpoint tells"
        )
    if book.header_since_ms is None:
        notes.append(f"no record carries the {WRITER_HEADER} header yet: every record counts as the job's")
    elif book.legacy_records:
        notes.append(
            f"{book.legacy_records} records without the header written before {utc_text(book.header_since_ms)} "
            "(the first headered one) count as the job's"
        )
    if book.reopened:
        notes.append(f"{book.reopened} windows fired again after they had closed (a restart without state)")
    if book.unreadable.records:
        notes.append(f"{book.unreadable.records} of the job's records did not decode (counted 0)")
    acked = sum(s.records for s in book.acknowledged.values())
    if acked:
        notes.append(
            f"{acked} acknowledged foreign records ({sum(s.rows for s in book.acknowledged.values())} rows claimed, "
            f"offsets {_spans_text(book.acknowledged)}) are not counted"
        )
    return HopBalance(
        job=hop.job.name,
        input=hop.input.qualified_name,
        outputs=hop.output_names,
        in_=sum(c.records for c in ins.values()),
        out=book.out,
        dead_letters=sum(c.records for c in dlq.values()),
        pending=pending.orders,
        range={
            hop.input.name: {str(p): c for p, c in cut.committed.items()},
            hop.output.name: {str(p): end for p, (_, end) in cut.output_end.items()},
            (hop.dead_letters.name if hop.dead_letters else "dead_letters"): {
                str(p): end for p, (_, end) in cut.dlq_end.items()
            },
            "checkpoint": cut.checkpoint.id if cut.checkpoint else None,
            "watermark": utc_text(now_mark) if now_mark is not None else None,
            "fired_through": utc_text(fired_through) if fired_through is not None else None,
            "windows": {
                "closed_through": utc_text(book.closed_through_end) if book.closed_through_end else None,
                "newest_end": utc_text(book.newest_end) if book.newest_end else None,
                "open": len(book.windows),
            },
        },
        other_writers=book.other_writers(hop.output.qualified_name, hop.output.name),
        pending_since=pending.since_ms / 1000 if pending.since_ms is not None else None,
        notes=tuple(notes),
    )


def _wait_for_checkpoint_after(flink: FlinkView, jid: str, t_ms: int, sleep, timeout_s: float = 30.0) -> None:
    """Until a checkpoint triggered after ``t_ms`` has completed (and settled), at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ck = flink.checkpoint(jid)
        if ck is not None and ck.trigger_ms > t_ms and _now_ms() - ck.ack_ms >= SETTLE_MS:
            return
        sleep(0.5)
