"""supplier-stats' output as a book of windows: the last firing of each (window_start, supplier) the job wrote, the
windows that can no longer fire folded into one closed total, and records another producer wrote named apart.

The job fires a window when its event-time clock passes the window's end and again for every order that arrives
within the allowed lateness, so a window can be written more than once: its LAST firing holds its count and total. A
window that can no longer fire is folded into the closed total: once the job has written a window ending at E, its
clock had passed E, so a window ending at or before E - allowed lateness was already purged by Flink.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from confluent_kafka import Message

from lineage_assets.conservation.avro_values import EPOCH, AvroValues
from lineage_assets.conservation.balance import OtherWriter
from lineage_assets.conservation.foreign_records import Batch, ForeignRecords, Run
from lineage_assets.conservation.values import units_of_double

#: as flink_jobs/supplier_stats_job.py sets them (a unit test holds the two equal)
WINDOW_MS = 5_000
OUT_OF_ORDERNESS_MS = 5_000
ALLOWED_LATENESS_MS = 5_000
WRITER_HEADER = "lineage-lab-writer"
WRITER = "supplier-stats"


@functools.lru_cache(maxsize=4096)
def utc_text(ms: int) -> str:
    """The job's window bound format (OrderRule.utcText: seconds, UTC)."""
    return (EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: str) -> int:
    return (
        int((datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) - EPOCH) / timedelta(seconds=1)) * 1000
    )


def window_start(bid_ms: int) -> int:
    """Flink's tumbling window start (offset 0) of an event time."""
    return bid_ms - (bid_ms % WINDOW_MS)


def window_key(start: str, supplier: str) -> str:
    return f"{start}|{supplier}"


def window_end(start_ms: int) -> int:
    """The end (exclusive) of the tumbling window starting at ``start_ms``."""
    return start_ms + WINDOW_MS


def fired_through_of(newest_end: int | None) -> int | None:
    """The event time the job's clock had reached when it fired the window ending at ``newest_end``: Flink fires a
    window at its maxTimestamp, end - 1. None when nothing fired."""
    return None if newest_end is None else newest_end - 1


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
    #: total_price in units (values.py): the value the window claims
    units: int = 0


def spans_text(spans: dict[int, Run]) -> str:
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
    windows: dict[str, list[int]] = field(default_factory=dict)  # key -> [count, window end ms, total units]
    closed_count: int = 0
    closed_units: int = 0
    #: whether every window's total was kept (False for a book kept before values were: its totals are unknown)
    values: bool = True
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
        return self.closed_count + sum(w[0] for w in self.windows.values())

    @property
    def foreign_rows(self) -> int:
        return self.foreign.rows

    @property
    def out(self) -> int:
        return self.job_out + self.foreign_rows

    @property
    def out_units(self) -> int:
        """The total the windows claim (the job's and other producers'), in units."""
        return self.closed_units + sum(w[2] for w in self.windows.values()) + self.foreign.units

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
                self.foreign.add(r.partition, r.offset, max(r.count, 0), accepted, r.units)
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
            self.windows[key] = [r.count, r.window_end_ms, r.units]
            self.newest_end = r.window_end_ms if self.newest_end is None else max(self.newest_end, r.window_end_ms)

    def prune(self) -> int:
        """Fold the windows that can no longer fire into the closed total; returns how many."""
        if self.newest_end is None:
            return 0
        bound = self.newest_end - ALLOWED_LATENESS_MS
        done = [k for k, w in self.windows.items() if w[1] <= bound]
        for k in done:
            count, end, units = self.windows.pop(k)
            self.closed_count += count
            self.closed_units += units
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

    def other_writers(self, output: str, topic: str, summed: tuple[str, ...] = ()) -> tuple[OtherWriter, ...]:
        """One writer per batch of foreign records (see ``foreign_records``), with the totals they claim in the
        ``summed`` columns."""
        return self.foreign.writers(
            output,
            lambda b: (
                f"{b.records} records without the job's writer header ({WRITER_HEADER}: {WRITER}), {topic} "
                f"offsets {b.spans()}"
            ),
            summed=summed,
        )

    # persistence
    def to_json(self) -> str:
        def spans(d: dict[int, Run]) -> dict[str, list[int]]:
            return {str(p): [s.records, s.rows, s.first, s.last] for p, s in d.items()}

        return json.dumps(
            {
                "positions": {str(p): o for p, o in self.positions.items()},
                "windows": self.windows,
                "closed": [self.closed_count, self.closed_windows, self.closed_through_end, self.closed_units],
                "values": self.values,
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

        closed = d.get("closed") or [0, 0, None, 0]
        windows = {k: list(v) for k, v in d.get("windows", {}).items()}
        with_values = d.get("values") is True
        return cls(
            positions={int(p): o for p, o in d.get("positions", {}).items()},
            windows={k: v if len(v) > 2 else [*v, 0] for k, v in windows.items()},
            closed_count=closed[0],
            closed_windows=closed[1],
            closed_through_end=closed[2],
            closed_units=closed[3] if len(closed) > 3 else 0,
            values=with_values,
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
            base.partition,
            base.offset,
            base.timestamp_ms,
            headered,
            start,
            parse_utc(end),
            supplier,
            count,
            units_of_double(record.get("total_price")),
        )
    except (TypeError, KeyError, ValueError):
        return base
