"""Which incarnation of each connector Kafka Connect runs, from Connect's own record of it: the config topic.

A connector deleted and created again under the same name looks the same over Connect's REST API; its config topic
tells them apart (a tombstone for ``connector-<name>``, then a new config record). An incarnation is the offset of
the first config record after the latest tombstone; config updates keep it. Compaction of the config topic can in
rare cases move it to a later update (the creation record compacted away): that shows as one more run, never as a
lost one.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.topics import Kafka, KafkaUnavailable

PREFIX = b"connector-"
TARGET_STATE = b"target-state-"


@dataclass(frozen=True)
class Incarnation:
    connector: str
    #: ``<config topic>:<partition>@<offset>`` of the record that created it
    ref: str
    created_ms: int
    #: the same, of the last target-state record that started it again after a pause or stop (None: never)
    resumed_ref: str | None = None
    #: the same, of its latest config record: changes with every change of its configuration, even back to an
    #: earlier one (None: the record that created it)
    config_ref: str | None = None


def incarnations(bootstrap: Kafka, config_topic: str, timeout: float = 10.0) -> dict[str, Incarnation]:
    """Every connector the config topic holds now, with its incarnation (empty when the topic does not exist)."""
    consumer = Consumer(
        KafkaConnection.of(bootstrap).client_config(
            **{"group.id": "lineage-lab-incarnations", "enable.auto.commit": False, "enable.partition.eof": True}
        )
    )
    found: dict[str, Incarnation] = {}
    try:
        meta = consumer.list_topics(config_topic, timeout=timeout).topics.get(config_topic)
        if meta is None or meta.error is not None:
            return {}
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(config_topic, p), timeout=timeout)
            if high > low:
                ends[p] = (low, high)
        consumer.assign([TopicPartition(config_topic, p, low) for p, (low, _) in ends.items()])
        remaining = set(ends)
        while remaining:
            msg = consumer.poll(timeout)
            if msg is None:
                raise KafkaUnavailable(bootstrap, timeout, RuntimeError(f"reading {config_topic} stalled"))
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    remaining.discard(msg.partition())
                    continue
                raise KafkaUnavailable(bootstrap, timeout, KafkaException(msg.error()))
            key = msg.key() or b""
            if key.startswith(TARGET_STATE) and msg.value():
                name = key[len(TARGET_STATE) :].decode("utf-8", errors="replace")
                if name in found and json.loads(msg.value()).get("state") == "STARTED":
                    ref = f"{config_topic}:{msg.partition()}@{msg.offset()}"
                    found[name] = dataclasses.replace(found[name], resumed_ref=ref)
            elif key.startswith(PREFIX):
                name = key[len(PREFIX) :].decode("utf-8", errors="replace")
                if msg.value() is None:
                    found.pop(name, None)
                elif name not in found:
                    ref = f"{config_topic}:{msg.partition()}@{msg.offset()}"
                    found[name] = Incarnation(name, ref, msg.timestamp()[1])
                else:
                    ref = f"{config_topic}:{msg.partition()}@{msg.offset()}"
                    found[name] = dataclasses.replace(found[name], config_ref=ref)
            if msg.offset() + 1 >= ends[msg.partition()][1]:
                remaining.discard(msg.partition())
    except KafkaException as exc:
        raise KafkaUnavailable(bootstrap, timeout, exc) from exc
    finally:
        consumer.close()
    return found
