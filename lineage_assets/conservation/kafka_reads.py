"""Reading committed records of a Kafka topic the way the readers need them: over known offset ranges, up to known
end offsets, from the first record stamped at a time; a broker that stops answering is a ``StoreUnavailable``
naming it and what to do, never a wait."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.stores import Stores
from lineage_assets.conservation.window_book import utc_text


def consumer_of(stores: Stores, name: str, committed_only: bool = True) -> Consumer:
    """Reads up to known end offsets (committed records only, unless not ``committed_only``: as Connect's sink
    consumer reads): a partition ending in a transaction marker is only done at its end-of-partition event, which a
    fetch waiting for more data (500 ms by default) would hold back. The group is never joined nor committed to."""
    return Consumer(
        stores.kafka.connection.client_config(
            **{
                "group.id": f"lineage-lab-reconcile-{name}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed" if committed_only else "read_uncommitted",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 20,
            }
        )
    )


def kafka_unavailable(stores: Stores, where: str, exc: Any) -> StoreUnavailable:
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
        raise kafka_unavailable(stores, f"finding {topic}'s records stamped from {utc_text(since_ms)}", exc) from exc
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
            raise kafka_unavailable(stores, where, exc) from exc


def oldest_stamp(stores: Stores, topic: str, at: dict[int, int]) -> float | None:
    """Epoch seconds of the oldest committed record at or after the given offsets (partition -> offset; one record
    read per partition): how long the oldest pending record has waited. None when there is none, or Kafka did not
    answer (only the age is lost; the figures stand)."""
    if not at:
        return None
    consumer = consumer_of(stores, "oldest")
    found: list[float] = []
    try:
        for partition, offset in at.items():
            consumer.assign([TopicPartition(topic, partition, offset)])
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is None:
                    if msg.timestamp()[1] > 0:
                        found.append(msg.timestamp()[1] / 1000)
                    break
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                return None
    except KafkaException:
        return None
    finally:
        consumer.close()
    return min(found) if found else None
