"""Reading Kafka by time: the first offsets of a topic's tail stamped from a time, and the age of the oldest record at
given offsets (ranges are read with ``KafkaCounter.records``); a broker that stops answering is a
``StoreUnavailable`` naming it and what to do, never a wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from lineage_assets.conservation.avro_values import AvroValues, dead_raw_value
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.kafka_counts import PartitionCount, PartitionSum
from lineage_assets.conservation.stores import Stores


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
        since = datetime.fromtimestamp(since_ms / 1000, UTC).isoformat(timespec="seconds")
        raise stores.kafka.unavailable(f"finding {topic}'s records stamped from {since}", exc) from exc
    for tp in timed:
        lo, end = ranges[tp.partition]
        starts[tp.partition] = end if tp.offset < 0 else max(tp.offset, lo)
    return starts


def oldest_stamp(stores: Stores, topic: str, at: dict[int, int]) -> float | None:
    """Epoch seconds of the oldest committed record at or after the given offsets (partition -> offset; one record
    read per partition): how long the oldest pending record has waited. None when there is none, or Kafka did not
    answer (only the age is lost; the figures stand)."""
    if not at:
        return None
    consumer = stores.kafka.consumer()
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


def weighed_orders(
    stores: Stores,
    hop: Hop,
    avro: AvroValues,
    measure: str,
    weigh: Callable[[dict[str, Any] | None], int],
    targets: dict[int, list[int]],
    dlq_end: dict[int, int],
    counted: dict[tuple[int, int], PartitionCount],
) -> tuple[dict[tuple[int, int], PartitionSum], int, list[int]]:
    """A Flink hop's orders weighed (``weigh`` of each decoded order, remembered as ``measure``): (the input's sums
    at ``targets``, the dead letters' total up to ``dlq_end``, each weighed by the order it carries; the partitions
    whose sums begin later than their counts ``counted``: retention deleted records counted before they were
    weighed, so the values are unknown)."""
    ins = stores.kafka.sum(hop.input.name, measure, lambda msg: weigh(avro.decode(msg.value())), targets)
    late = sorted({p for (p, t), s in ins.items() if (p, t) in counted and s.start > counted[(p, t)].start})
    if late or hop.dead_letters is None:
        return ins, 0, late
    letters = stores.kafka.sum(
        hop.dead_letters.name,
        f"raw_value.{measure}",
        lambda msg: weigh(avro.decode(dead_raw_value(msg))),
        {p: [end] for p, end in dlq_end.items()},
    )
    return ins, sum(s.total for s in letters.values()), late
