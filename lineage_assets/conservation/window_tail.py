"""The tail of ``orders`` against the window book: which orders below the job's committed offsets are still pending
(their window has no committed firing yet), decided once per order and remembered (``TailBook``), with their dead
letters matched by raw value."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import Message

from lineage_assets.conservation.avro_values import AvroValues, millis
from lineage_assets.conservation.values import units_of
from lineage_assets.conservation.window_book import (
    ALLOWED_LATENESS_MS,
    OUT_OF_ORDERNESS_MS,
    WINDOW_MS,
    WindowBook,
    utc_text,
    window_end,
    window_key,
    window_start,
)

#: how far before the oldest open window the tail of orders is read, by record timestamp: an order stamped earlier
#: whose bid_time lies in an open window (placed more than this ahead of its record time) is not seen as pending
TAIL_SLACK_MS = 60_000


@dataclass(frozen=True)
class TailOrder:
    """A committed ``orders`` record below C in the tail (``supplier`` None: not an order Python can decode)."""

    partition: int
    offset: int
    timestamp_ms: int
    raw: bytes | None
    supplier: str | None = None
    bid_ms: int | None = None
    #: the summed column's value (``price``) in units (values.py)
    units: int = 0


@dataclass(frozen=True)
class Pending:
    orders: int
    since_ms: int | None
    #: window end (ms) -> pending orders in it
    windows: dict[int, int]
    #: the pending orders' summed column, in units
    units: int = 0


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
    units: int = 0

    @property
    def window_end_ms(self) -> int:
        return window_end(self.window_start_ms)

    @property
    def key(self) -> str:
        return window_key(utc_text(self.window_start_ms), self.supplier)


def undecided(start_ms: int, supplier: str, book: WindowBook, fired_through: int | None) -> bool:
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
    #: whether every candidate's value was kept (False for a book kept before values were)
    values: bool = True

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
        if undecided(start, order.supplier, book, fired_through):
            self.candidates.append(
                Candidate(
                    order.partition,
                    order.offset,
                    order.timestamp_ms,
                    start,
                    order.supplier,
                    digest(order.raw) if order.raw is not None else "",
                    order.units,
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
            c for c in self.candidates if undecided(c.window_start_ms, c.supplier, book, self.fired_through)
        ]

    def pending(self) -> Pending:
        windows: Counter[int] = Counter(c.window_end_ms for c in self.candidates)
        since = min((c.timestamp_ms for c in self.candidates), default=None)
        return Pending(len(self.candidates), since, dict(windows), sum(c.units for c in self.candidates))

    # persistence
    def to_json(self) -> str:
        return json.dumps(
            {
                "positions": {str(p): o for p, o in self.positions.items()},
                "candidates": [
                    [c.partition, c.offset, c.timestamp_ms, c.window_start_ms, c.supplier, c.digest, c.units]
                    for c in self.candidates
                ],
                "values": self.values,
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
            values=d.get("values") is True,
        )


def tail_start_ms(fired_through: int | None) -> int | None:
    """The record timestamp the tail of orders (and of dead letters) is read from: the oldest window that can hold
    a pending order starts after ``fired_through - window``; records are stamped after their bid_time, less
    out-of-orderness, lateness and a slack for clocks. None: from the log start (nothing known yet)."""
    if fired_through is None:
        return None
    return max(fired_through - WINDOW_MS - OUT_OF_ORDERNESS_MS - ALLOWED_LATENESS_MS - TAIL_SLACK_MS, 0)


def tail_order(msg: Message, avro: AvroValues, summed: str | None = None) -> TailOrder:
    """An ``orders`` record as the tail needs it; ``summed``: the column whose value it carries (``price``)."""
    value = msg.value()
    record = avro.decode(value)
    supplier = record.get("supplier") if record else None
    bid = millis(record.get("bid_time")) if record else None
    ok = isinstance(supplier, str) and bid is not None
    units = units_of(record.get(summed)) if record and summed else 0
    return TailOrder(
        msg.partition(), msg.offset(), msg.timestamp()[1], value, supplier if ok else None, bid if ok else None, units
    )
