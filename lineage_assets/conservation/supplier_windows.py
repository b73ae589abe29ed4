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

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from lineage_assets.conservation import acceptances
from lineage_assets.conservation.avro_values import AvroValues, dead_raw_value
from lineage_assets.conservation.balance import HopBalance, OtherWriter, StoreUnavailable
from lineage_assets.conservation.foreign_records import Run
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.kafka_reads import tail_starts
from lineage_assets.conservation.stores import Stores
from lineage_assets.conservation.window_book import (
    WRITER,
    WRITER_HEADER,
    OutputRecord,
    WindowBook,
    output_record,
    spans_text,
    utc_text,
)
from lineage_assets.conservation.window_cut import Cut, FlinkView, cut_key, now_ms, take_cut, wait_for_checkpoint_after
from lineage_assets.conservation.window_tail import TailBook, digest, tail_order, tail_start_ms
from lineage_assets.conservation.window_values import value_balances

#: the facts kind (``CountStore``) of the window book, and the scan name
FACTS = "supplier-windows"
SCAN = "supplier-windows"


log = logging.getLogger(__name__)


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
    summed: str | None = None,
) -> TailRead:
    """Bring ``tail`` up to the cut: decode the orders from where it stood (or the tail start) to C and the dead
    letters past its position, then settle its candidates against ``book`` and ``fired_through``."""
    since = tail_start_ms(fired_through)
    log_starts = {p: lo for p, (lo, _) in stores.kafka.offsets(hop.input.name).items()}
    missing = sorted(set(cut.committed) - set(log_starts))
    if missing:
        raise StoreUnavailable(f"{hop.input.name} has no partitions {missing} on {stores.kafka.connection.bootstrap}")
    consumer = stores.kafka.consumer()
    try:
        input_range = {p: (log_starts[p], c) for p, c in cut.committed.items()}
        order_starts = tail_starts(stores, consumer, hop.input.name, input_range, since)
        ranges, notes = tail.resume(cut.committed, order_starts, log_starts)
        letters: list[tuple[int, int, str]] = []
        if hop.dead_letters:
            dlq_starts = tail_starts(stores, consumer, hop.dead_letters.name, cut.dlq_end, since)
            dlq_ranges = tail.resume_dead({p: end for p, (_, end) in cut.dlq_end.items()}, dlq_starts)
            for msg in stores.kafka.records(consumer, hop.dead_letters.name, dlq_ranges):
                raw = dead_raw_value(msg)
                if raw is not None:
                    letters.append((msg.partition(), msg.offset(), digest(raw)))
        tail.take_dead(letters)
        decoded = 0
        for msg in stores.kafka.records(consumer, hop.input.name, ranges):
            tail.take_order(tail_order(msg, avro, summed), book, fired_through)
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
    return [OtherWriter(WRITER, f"acknowledged offsets {spans_text({p: s})}", s.rows) for p, s in moved.items()]


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


@dataclass
class Reading:
    """What one reconciliation saw at its cut: the books brought up to it and the event time known to have fired."""

    jid: str | None
    cut: Cut
    book: WindowBook
    tail: TailBook
    fired_through: int | None
    now_mark: int | None
    doubtful: bool
    read: TailRead
    decoded: int = 0
    dead_read: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def since(self) -> int | None:
        return tail_start_ms(self.fired_through)


def read_at_cut(hop: Hop, stores: Stores, avro: AvroValues, summed: str | None, sleep, steps: _Steps) -> Reading:
    """The books brought up to a cut, taken a second time after a checkpoint when pending windows are behind the
    job's clock; what it learned saved once at the end."""
    flink = FlinkView(stores, hop.job.name)
    jid = flink.running_job()
    t0 = now_ms()
    w0 = flink.watermark(jid) if jid else None
    remembered = stores.counts.facts(FACTS)
    # the watermark an earlier reconciliation read (of the same Flink job): it bounds what fired before any
    # checkpoint triggered after it, so a cut need not wait for a checkpoint after w0 to know the tail is short
    earlier = json.loads(remembered.get("watermark") or "null")
    # what earlier runs decoded of the tail; brought up to each attempt's cut in turn (every decision it keeps is
    # final, so a second attempt goes on from the first one's state and adds nothing twice), saved once at the end
    tail = TailBook.from_json(remembered.get("tail"))
    group, group_from = stores.consumer_group(hop.job.name)
    steps.lap("flink, remembered facts")
    notes: list[str] = [f"group {group} ({group_from})"]
    decoded = dead_read = 0
    for attempt in range(2):
        cut = take_cut(hop, stores, flink, jid, group, sleep, remembered.get("quiet_cut") or None)
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
        read = advance_tail(hop, stores, cut, tail, book, fired_through, avro, summed)
        decoded, dead_read = decoded + read.orders, dead_read + read.dead_letters
        notes += [n for n in read.notes if n not in notes]
        steps.lap("tail")
        now_mark = flink.watermark(jid) if jid else None
        # a pending window the clock has passed may have fired after the checkpoint (its output not committed yet)
        # or be lost: one checkpoint triggered after w0 was read tells (then w0 bounds what fired before it)
        doubtful = now_mark is not None and any(end - 1 <= now_mark for end in tail.pending().windows)
        if attempt or not doubtful or (cut.checkpoint and cut.checkpoint.trigger_ms > t0):
            break
        wait_for_checkpoint_after(flink, jid, t0, sleep)
        steps.lap("wait for a checkpoint")
    # a settled cut that left nothing pending: seeing it unchanged next time needs no wait for a checkpoint to settle
    quiet = cut.steady and tail.pending().orders == 0 and not doubtful
    saved = {"tail": tail.to_json(), "quiet_cut": cut_key(cut) if quiet else ""}
    if jid and w0 is not None:
        saved["watermark"] = json.dumps({"jid": jid, "w": w0, "t": t0})
    stores.counts.put_facts(FACTS, saved)
    return Reading(jid, cut, book, tail, fired_through, now_mark, doubtful, read, decoded, dead_read, notes)


def notes_of(r: Reading) -> list[str]:
    """What the figures mean at this reading, one line each."""
    book, cut = r.book, r.cut
    notes = [
        f"cut: checkpoint {cut.checkpoint.id if cut.checkpoint else '-'}; the group's committed offsets C read "
        "before and after the output's and dead letters' ends"
        + (" (unchanged)" if cut.steady else " (still moving after retries: figures may be one checkpoint apart)"),
        "in: committed orders below C; out: the last count of each (window_start, supplier) the job wrote "
        f"({book.closed_windows} closed windows folded into {book.closed_count}, {len(book.windows)} windows open) "
        "plus the counts claimed by other producers' records",
        "pending: orders below C (tail read from "
        + (utc_text(r.since) if r.since is not None else "the log start")
        + ") in windows with no committed firing ending after event time "
        + (utc_text(r.fired_through) if r.fired_through is not None else "- (nothing fired yet)")
        + "; dead letters matched by raw value. The tail is decoded once: each run reads only the orders and dead "
        "letters past the positions remembered, and keeps the orders that may still be pending",
        *r.notes,
    ]
    if r.jid is None:
        notes.append(
            "the job is not running: no watermark; windows not written yet count as pending (they fire when it "
            "resumes from its checkpoint), so a window lost after the newest one written cannot be told yet"
        )
    elif r.doubtful:
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
            f"offsets {spans_text(book.acknowledged)}) are not counted"
        )
    return notes


def range_of(hop: Hop, r: Reading) -> dict[str, Any]:
    """The offsets, checkpoint and event times the figures cover."""
    cut, book = r.cut, r.book
    return {
        hop.input.name: {str(p): c for p, c in cut.committed.items()},
        hop.output.name: {str(p): end for p, (_, end) in cut.output_end.items()},
        (hop.dead_letters.name if hop.dead_letters else "dead_letters"): {
            str(p): end for p, (_, end) in cut.dlq_end.items()
        },
        "checkpoint": cut.checkpoint.id if cut.checkpoint else None,
        "watermark": utc_text(r.now_mark) if r.now_mark is not None else None,
        "fired_through": utc_text(r.fired_through) if r.fired_through is not None else None,
        "windows": {
            "closed_through": utc_text(book.closed_through_end) if book.closed_through_end else None,
            "newest_end": utc_text(book.newest_end) if book.newest_end else None,
            "open": len(book.windows),
        },
    }


def balance(hop: Hop, stores: Stores, sleep=time.sleep) -> HopBalance:
    """supplier-stats' balance at one cut, its values with it (see the module doc)."""
    steps = _Steps()
    columns = hop.job.summed_columns(hop.output.key)  # total_price -> price: the values to weigh
    avro = AvroValues(stores.resources.kafka.registry())
    r = read_at_cut(hop, stores, avro, next(iter(columns.values()), None), sleep, steps)
    cut, book, pending = r.cut, r.book, r.tail.pending()
    ins = stores.kafka.count(hop.input.name, {p: [c] for p, c in cut.committed.items()})
    dlq = stores.kafka.count(hop.dead_letters.name, {p: [end] for p, (_, end) in cut.dlq_end.items()})
    steps.lap("in and dead-letter counts")
    values = value_balances(hop, stores, avro, cut, book, r.tail, ins, r.fired_through)
    steps.lap("values")
    log.info(
        "supplier-stats reconciled in %s; decoded %d orders (%s) and %d dead letters, %d candidates, %d unmatched "
        "dead letters remembered",
        steps,
        r.decoded,
        spans_text({p: Run(1, 0, lo, hi - 1) for p, (lo, hi) in r.read.order_ranges.items() if hi > lo}) or "none",
        r.dead_read,
        len(r.tail.candidates),
        sum(len(w) for w in r.tail.dead.values()),
    )
    return HopBalance(
        job=hop.job.name,
        input=hop.input.qualified_name,
        outputs=hop.output_names,
        in_=sum(c.records for c in ins.values()),
        out=book.out,
        dead_letters=sum(c.records for c in dlq.values()),
        pending=pending.orders,
        range=range_of(hop, r),
        other_writers=book.other_writers(hop.output.qualified_name, hop.output.name, tuple(columns)),
        values=values,
        pending_since=pending.since_ms / 1000 if pending.since_ms is not None else None,
        notes=tuple(notes_of(r)),
    )
