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
from collections.abc import Callable
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
                    self._consumer()
                    if group is None
                    else Consumer(self.connection.client_config(**{"group.id": group, "enable.auto.commit": False}))
                )
            return self._kept[group]

    def _consumer(self) -> Consumer:
        return Consumer(
            self.connection.client_config(
                **{
                    "group.id": f"lineage-lab-reconcile-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_committed",
                    "auto.offset.reset": "earliest",
                    # a partition ending in a transaction marker has nothing more to give: without this each such
                    # read waits out the broker's default fetch wait (500 ms) before the EOF arrives
                    "fetch.wait.max.ms": 20,
                }
            )
        )

    def _unavailable(self, what: str, exc: Exception | str) -> StoreUnavailable:
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
            raise self._unavailable(f"reading the offsets of {topic}", exc) from exc

    def committed(self, topic: str, group: str, partitions: list[int]) -> dict[int, int]:
        """partition -> the consumer group's committed offset (-1: none)."""
        try:
            found = self._kept_consumer(group).committed(
                [TopicPartition(topic, p) for p in partitions], timeout=self.timeout
            )
        except KafkaException as exc:
            raise self._unavailable(f"reading group {group}'s offsets on {topic}", exc) from exc
        return {tp.partition: tp.offset for tp in found}

    def count(self, topic: str, targets: dict[int, list[int]]) -> dict[tuple[int, int], PartitionCount]:
        """(partition, target offset) -> the committed records below that offset, every target of a partition in
        one read from the nearest remembered mark."""
        ranges = self.offsets(topic)
        found: dict[tuple[int, int], PartitionCount] = {}
        for partition, wanted in targets.items():
            if partition not in ranges:
                raise StoreUnavailable(f"topic {topic!r} has no partition {partition} on {self.connection.bootstrap}")
            log_start, end = ranges[partition]
            for target, counted in self._count_partition(topic, partition, sorted(set(wanted)), log_start, end):
                found[(partition, target)] = counted
        return found

    def _count_partition(
        self, topic: str, partition: int, targets: list[int], log_start: int, end: int
    ) -> list[tuple[int, PartitionCount]]:
        first = self.store.first_mark(topic, partition)
        if first is None:
            # the first count of this partition begins at its log start; anything below was deleted uncounted
            first = (log_start, 0)
            self.store.add_marks(topic, partition, [first])
        origin = first[0]
        clipped = {t: min(max(t, origin), end) for t in targets}
        start, records = self.store.mark_below(topic, partition, min(clipped.values())) or first
        if start < log_start:
            raise StoreUnavailable(
                f"{topic}[{partition}]: retention deleted offsets {start}..{log_start - 1} before they were counted "
                f"up to {min(clipped.values())}; run reconcile more often than the topic's retention deletes, or "
                "increase its retention.ms"
            )
        wanted = sorted(set(clipped.values()))
        # a target at the mark read from is that mark, taken now: the marks this read adds can push it out of the
        # store (it keeps the newest and the first), and a later lookup would answer an older, lower mark
        reached: dict[int, tuple[int, int]] = {t: (start, records) for t in wanted if t <= start}
        if wanted[-1] > start:
            consumer = self._consumer()
            try:
                consumer.assign([TopicPartition(topic, partition, start)])
                for target, at, counted, _ in self._read(consumer, topic, partition, start, records, wanted):
                    reached[target] = (at, counted)
            finally:
                consumer.close()
            self.store.add_marks(topic, partition, sorted(set(reached.values())))
        return [
            (t, PartitionCount(partition, origin, reached[c][0], reached[c][1], uncounted_before=origin))
            for t, c in clipped.items()
        ]

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
                raise self._unavailable(what, f"no record and no end of partition in {_STALL_S:.0f} s")

    def sum(
        self, topic: str, measure: str, value_of: ValueOf, targets: dict[int, list[int]]
    ) -> dict[tuple[int, int], PartitionSum]:
        """(partition, target offset) -> the committed records below it and the sum of ``value_of`` over them, from
        the nearest remembered mark of ``measure`` (each value decoded once)."""
        ranges = self.offsets(topic)
        found: dict[tuple[int, int], PartitionSum] = {}
        for partition, wanted in targets.items():
            if partition not in ranges:
                raise StoreUnavailable(f"topic {topic!r} has no partition {partition} on {self.connection.bootstrap}")
            log_start, end = ranges[partition]
            first = self.store.first_sum_mark(topic, partition, measure)
            if first is None:
                first = (log_start, 0, 0)
                self.store.add_sum_marks(topic, partition, measure, [first])
            clipped = {t: min(max(t, first[0]), end) for t in sorted(set(wanted))}
            low = min(clipped.values())
            start, records, total = self.store.sum_mark_below(topic, partition, measure, low) or first
            if start < log_start:
                raise StoreUnavailable(
                    f"{topic}[{partition}]: retention deleted offsets {start}..{log_start - 1} before their {measure} "
                    f"was summed up to {low}; run reconcile more often than the topic's retention deletes, or "
                    "increase its retention.ms"
                )
            reached = {t: (start, records, total) for t in clipped.values() if t <= start}
            if max(clipped.values()) > start:
                consumer = self._consumer()
                try:
                    consumer.assign([TopicPartition(topic, partition, start)])
                    read = self._read(
                        consumer, topic, partition, start, records, sorted(set(clipped.values())), value_of, total
                    )
                    for target, at, counted, summed in read:
                        reached[target] = (at, counted, summed)
                finally:
                    consumer.close()
                self.store.add_sum_marks(topic, partition, measure, sorted(set(reached.values())))
            for t, c in clipped.items():
                at, counted, summed = reached[c]
                found[(partition, t)] = PartitionSum(partition, first[0], at, counted, summed)
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
                    raise self._unavailable(f"reading {topic}[{partition}]", err)
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

    def scan(self, name: str, topic: str, handle: Callable[[Message], None]) -> dict[int, int]:
        """Hand every committed record of ``topic`` not handed before under ``name`` to ``handle``, up to the end
        now; returns partition -> the offset scanned up to. The position is saved after ``handle`` saw the batch."""
        reached: dict[int, int] = {}
        for partition, (log_start, end) in self.offsets(topic).items():
            position = self.store.scan_position(name, topic, partition)
            position = log_start if position is None else max(position, log_start)
            if position >= end:
                reached[partition] = position
                continue
            consumer = self._consumer()
            try:
                consumer.assign([TopicPartition(topic, partition, position)])
                for batch in self._batches(consumer, f"reading {topic}[{partition}] from offset {position}"):
                    done = False
                    for msg in batch:
                        err = msg.error()
                        if err is not None and err.code() == KafkaError._PARTITION_EOF:
                            position, done = max(msg.offset(), position), True
                            break
                        if err is not None:
                            raise self._unavailable(f"reading {topic}[{partition}]", err)
                        handle(msg)
                        position = msg.offset() + 1
                        if position >= end:
                            done = True
                            break
                    if done:
                        break
            finally:
                consumer.close()
            self.store.set_scan_position(name, topic, partition, position)
            reached[partition] = position
        return reached


def _close_all(consumers: dict[str | None, Consumer]) -> None:
    for consumer in consumers.values():
        consumer.close()
    consumers.clear()
