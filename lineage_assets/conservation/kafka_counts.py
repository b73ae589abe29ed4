"""How many committed records a Kafka partition holds below an offset (and the sum of a measure of their values),
counted once and remembered.

Offsets are not counts: transactional writers (the Flink jobs' exactly-once sinks, a hostile producer's aborted
transaction) leave control records and aborted records between committed ones. So records are counted by reading
them read-committed, and the count below each offset reached is kept as a mark (``CountStore``). A later count
resumes from the nearest mark: each run reads only what arrived since, and the figures stay exact after retention
deletes old segments (the marks remember what was counted before). A sum (``KafkaCounter.sum``: value conservation)
is kept the same way, as marks of (records, total units) per measure, each value decoded once.
"""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.kafka.connection import KafkaConnection

#: seconds without a record or the end of the partition before the broker counts as not answering
_STALL_S = 15.0
_BATCH = 5000


#: a record's value in a measure's units (``values.units_of`` of a decoded column)
ValueOf = Callable[[Message], int]


@dataclass(frozen=True)
class PartitionSum:
    partition: int
    start: int  # the first offset the sum covers (the log start when summing began)
    upto: int
    records: int
    total: int  # the measure's units summed over the records below ``upto``


@dataclass(frozen=True)
class PartitionCount:
    partition: int
    start: int  # the first offset the count covers (the log start when counting began)
    upto: int  # records at offsets below this are counted
    records: int
    #: offsets below this were deleted by retention before the first count (0: none; equal to ``start``)
    uncounted_before: int = 0


class KafkaCounter:
    def __init__(self, connection: KafkaConnection, store: CountStore, timeout: float = 10.0) -> None:
        self.connection = connection
        self.store = store
        self.timeout = timeout
        #: consumers kept for the counter's life: one for metadata and watermarks (key None), one per group whose
        #: offsets are read. A new consumer per query cost a connection and a metadata round trip, about 45 ms, some
        #: 30 times a reconciliation. Closed when the counter is collected or the interpreter exits.
        self._kept: dict[str | None, Consumer] = {}
        self._kept_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._kept)

    def _kept_consumer(self, group: str | None = None) -> Consumer:
        with self._kept_lock:
            if group not in self._kept:
                self._kept[group] = (
                    self.consumer()
                    if group is None
                    else Consumer(self.connection.client_config(**{"group.id": group, "enable.auto.commit": False}))
                )
            return self._kept[group]

    def consumer(self, committed_only: bool = True) -> Consumer:
        """A consumer for reading up to known end offsets (committed records only, unless not ``committed_only``: as
        Connect's sink consumer reads); its group is never joined nor committed to. A partition ending in a
        transaction marker is only done at its end-of-partition event, which a fetch waiting for more data (500 ms
        by default) would hold back: hence the short fetch wait."""
        return Consumer(
            self.connection.client_config(
                **{
                    "group.id": f"lineage-lab-reconcile-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_committed" if committed_only else "read_uncommitted",
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 20,
                }
            )
        )

    def unavailable(self, what: str, exc: Exception | str) -> StoreUnavailable:
        return StoreUnavailable(
            f"Kafka at {self.connection.bootstrap} did not answer while {what} ({exc}); start the broker "
            "(`lineage-lab stack up kafka`) or point LINEAGE_LAB_EXTERNAL_KAFKA at the cluster, then reconcile again"
        )

    def offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """partition -> (log start, last stable offset): the committed range a read-committed reader sees now."""
        consumer = self._kept_consumer()
        try:
            meta = consumer.list_topics(topic, timeout=self.timeout).topics.get(topic)
            if meta is None or meta.error is not None:
                raise StoreUnavailable(
                    f"Kafka at {self.connection.bootstrap} has no topic {topic!r}"
                    + (f" ({meta.error})" if meta is not None else "")
                    + "; deploy the pipeline (`lineage-lab pipeline run`) or check LINEAGE_LAB_EXTERNAL_KAFKA"
                )
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout, cached=False)
                for p in sorted(meta.partitions)
            }
        except KafkaException as exc:
            raise self.unavailable(f"reading the offsets of {topic}", exc) from exc

    def committed(self, topic: str, group: str, partitions: list[int]) -> dict[int, int]:
        """partition -> the consumer group's committed offset (-1: none)."""
        try:
            found = self._kept_consumer(group).committed(
                [TopicPartition(topic, p) for p in partitions], timeout=self.timeout
            )
        except KafkaException as exc:
            raise self.unavailable(f"reading group {group}'s offsets on {topic}", exc) from exc
        return {tp.partition: tp.offset for tp in found}

    def _batches(self, consumer: Consumer, what: str):
        """Batches of records (and the end-of-partition event) until the caller stops; a broker silent for
        ``_STALL_S`` raises. Short polls: ``consume`` waits for a full batch or its whole timeout."""
        quiet_since = time.monotonic()
        while True:
            batch = consumer.consume(_BATCH, timeout=0.2)
            if batch:
                quiet_since = time.monotonic()
                yield batch
            elif time.monotonic() - quiet_since > _STALL_S:
                raise self.unavailable(what, f"no record and no end of partition in {_STALL_S:.0f} s")

    def records(self, consumer: Consumer, topic: str, ranges: dict[int, tuple[int, int]]) -> Iterator[Message]:
        """The records of ``topic`` the consumer's isolation level sees (read-committed unless it says otherwise),
        partition -> [from, to) offsets, in offset order per partition: every reader's one way to read a range."""
        for p, (start, end) in sorted(ranges.items()):
            if start >= end:
                continue
            where = f"reading {topic}[{p}] offsets {start}..{end - 1}"
            try:
                consumer.assign([TopicPartition(topic, p, start)])
                yield from self._up_to(consumer, where, end)
            except KafkaException as exc:
                raise self.unavailable(where, exc) from exc

    def _up_to(self, consumer: Consumer, where: str, end: int) -> Iterator[Message]:
        for batch in self._batches(consumer, where):
            for msg in batch:
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    return
                if err is not None:
                    raise self.unavailable(where, err)
                if msg.offset() >= end:
                    return
                yield msg
                if msg.offset() + 1 >= end:
                    return

    def count(self, topic: str, targets: dict[int, list[int]]) -> dict[tuple[int, int], PartitionCount]:
        """(partition, target offset) -> the committed records below that offset, every target of a partition in
        one read from the nearest remembered mark."""
        return {
            key: PartitionCount(partition, origin, at, records, uncounted_before=origin)
            for key, (partition, origin, at, records, _) in self._reach(topic, targets).items()
        }

    def sum(
        self, topic: str, measure: str, value_of: ValueOf, targets: dict[int, list[int]]
    ) -> dict[tuple[int, int], PartitionSum]:
        """(partition, target offset) -> the committed records below it and the sum of ``value_of`` over them, from
        the nearest remembered mark of ``measure`` (each value decoded once)."""
        return {key: PartitionSum(*reached) for key, reached in self._reach(topic, targets, measure, value_of).items()}

    def _reach(
        self, topic: str, targets: dict[int, list[int]], measure: str | None = None, value_of: ValueOf | None = None
    ) -> dict[tuple[int, int], tuple[int, int, int, int, int]]:
        """(partition, target) -> (partition, the first offset counted, offset reached, records below it, their
        total): each partition read once, from the nearest remembered mark (of the counts, or of ``measure``), up to
        its highest target (a target past the end stops at the end); the marks reached are remembered."""
        ranges = self.offsets(topic)
        found: dict[tuple[int, int], tuple[int, int, int, int, int]] = {}
        for partition, wanted in targets.items():
            if partition not in ranges:
                raise StoreUnavailable(f"topic {topic!r} has no partition {partition} on {self.connection.bootstrap}")
            log_start, end = ranges[partition]
            marks = Marks(self.store, topic, partition, measure)
            first = marks.first()
            if first is None:  # the first count begins at the log start; anything below was deleted uncounted
                first = (log_start, 0, 0)
                marks.add([first])
            clipped = {t: min(max(t, first[0]), end) for t in sorted(set(wanted))}
            low = min(clipped.values())
            start, records, total = marks.below(low) or first
            if start < log_start:
                raise StoreUnavailable(
                    f"{topic}[{partition}]: retention deleted offsets {start}..{log_start - 1} before they were "
                    f"{'counted' if measure is None else f'summed ({measure})'} up to {low}; run reconcile more "
                    "often than the topic's retention deletes, or increase its retention.ms"
                )
            wanted_marks = sorted(set(clipped.values()))
            # a target at the mark read from is that mark, taken now: the marks this read adds can push it out of
            # the store (it keeps the newest and the first), and a later lookup would answer an older, lower mark
            reached = known_marks(marks, wanted_marks) or {
                t: (start, records, total) for t in wanted_marks if t <= start
            }
            if max(wanted_marks) > start and len(reached) < len(wanted_marks):
                consumer = self.consumer()
                try:
                    consumer.assign([TopicPartition(topic, partition, start)])
                    read = self._read(consumer, topic, partition, start, records, wanted_marks, value_of, total)
                    for target, at, counted, summed in read:
                        reached[target] = (at, counted, summed)
                finally:
                    consumer.close()
                marks.add(sorted(set(reached.values())))
            for t, c in clipped.items():
                found[(partition, t)] = (partition, first[0], *reached[c])
        return found

    def _read(
        self,
        consumer: Consumer,
        topic: str,
        partition: int,
        position: int,
        records: int,
        targets: list[int],
        value_of: ValueOf | None = None,
        total: int = 0,
    ):
        """Yield (target, offset counted up to, records below it, their total) for each target above ``position``,
        reading from ``position`` (whose records below are ``records``, summing ``total``); targets past the end stop
        at the end. ``value_of``: each record's value for the total (None: counts only)."""
        targets = [t for t in targets if t > position]
        for batch in self._batches(consumer, f"reading {topic}[{partition}] from offset {position}"):
            for msg in batch:
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    for t in targets:
                        yield t, min(t, msg.offset()), records, total
                    return
                if err is not None:
                    raise self.unavailable(f"reading {topic}[{partition}]", err)
                while targets and msg.offset() >= targets[0]:  # control records led up to this one
                    t = targets.pop(0)
                    yield t, t, records, total
                if not targets:
                    return
                records += 1
                if value_of is not None:
                    total += value_of(msg)
                position = msg.offset() + 1
                while targets and position >= targets[0]:
                    t = targets.pop(0)
                    yield t, t, records, total
                if not targets:
                    return

    def scan(
        self, name: str, topic: str, handle: Callable[[Message], None], done: Callable[[], None] | None = None
    ) -> dict[int, int]:
        """Hand every committed record of ``topic`` not handed before under ``name`` to ``handle``, up to the end
        now; returns partition -> the offset scanned up to. The position is saved after ``handle`` saw the range
        and ``done`` (if given) kept what it made of it, so a handler may keep its work in one write per range."""
        reached: dict[int, int] = {}
        for partition, (log_start, end) in self.offsets(topic).items():
            position = self.store.scan_position(name, topic, partition)
            position = log_start if position is None else max(position, log_start)
            if position < end:
                consumer = self.consumer()
                try:
                    for msg in self.records(consumer, topic, {partition: (position, end)}):
                        handle(msg)
                finally:
                    consumer.close()
                if done is not None:
                    done()
                position = end
                self.store.set_scan_position(name, topic, partition, position)
            reached[partition] = position
        return reached


@dataclass(frozen=True)
class Marks:
    """The remembered marks of one partition: of its counts (``measure`` None) or of a measure's sums, each as
    (offset, records below it, their total; 0 for counts)."""

    store: CountStore
    topic: str
    partition: int
    measure: str | None

    def first(self) -> tuple[int, int, int] | None:
        if self.measure is not None:
            return self.store.first_sum_mark(self.topic, self.partition, self.measure)
        mark = self.store.first_mark(self.topic, self.partition)
        return None if mark is None else (*mark, 0)

    def below(self, offset: int) -> tuple[int, int, int] | None:
        if self.measure is not None:
            return self.store.sum_mark_below(self.topic, self.partition, self.measure, offset)
        mark = self.store.mark_below(self.topic, self.partition, offset)
        return None if mark is None else (*mark, 0)

    def add(self, marks: list[tuple[int, int, int]]) -> None:
        if self.measure is not None:
            self.store.add_sum_marks(self.topic, self.partition, self.measure, marks)
        else:
            self.store.add_marks(self.topic, self.partition, sorted({(o, r) for o, r, _ in marks}))


def known_marks(marks: Marks, targets: list[int]) -> dict[int, tuple[int, int, int]] | None:
    """target -> its own mark, when every target has one (None: some target must be read). An idle partition ending
    in a transaction marker has its committed offset one below its end: reading from the one mark to the other would
    wait out a consume timeout (0.2 s) for nothing."""
    found = {}
    for target in targets:
        mark = marks.below(target)
        if mark is None or mark[0] != target:
            return None
        found[target] = mark
    return found


def _close_all(consumers: dict[str | None, Consumer]) -> None:
    for consumer in consumers.values():
        consumer.close()
    consumers.clear()
