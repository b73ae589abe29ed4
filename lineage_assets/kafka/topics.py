"""Create topics explicitly (partitions, retention) and read their end offsets, with confluent-kafka."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from lineage_assets.kafka.connection import KafkaConnection

#: a cluster: its bootstrap servers alone (the embedded broker) or with its security settings
Kafka = KafkaConnection | str


class TopicError(RuntimeError):
    """A topic cannot be created or brought to its declared shape."""


class KafkaUnavailable(RuntimeError):
    """The broker did not answer; the message names it and says what to check."""

    def __init__(self, bootstrap: Kafka, timeout: float, cause: Exception) -> None:
        super().__init__(
            f"Kafka at {bootstrap} did not answer within {timeout:.0f} s ({cause}): is the broker up "
            "(`lineage-lab stack status`), are LINEAGE_LAB_EXTERNAL_KAFKA / LINEAGE_LAB_KAFKA_PORT right, and do "
            "LINEAGE_LAB_KAFKA_SECURITY_PROTOCOL and the SASL/TLS settings match the broker's listener?"
        )


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    retention_ms: int
    cleanup_policy: str = "delete"
    #: the largest record batch the topic accepts; None: the broker's default
    max_message_bytes: int | None = None

    @property
    def configs(self) -> dict[str, str]:
        configs = {"retention.ms": str(self.retention_ms), "cleanup.policy": self.cleanup_policy}
        if self.max_message_bytes is not None:
            configs["max.message.bytes"] = str(self.max_message_bytes)
        return configs


def _admin(bootstrap: Kafka) -> AdminClient:
    return AdminClient(KafkaConnection.of(bootstrap).client_config(**{"socket.timeout.ms": 10000}))


def ensure_topic(
    bootstrap: Kafka, spec: TopicSpec, timeout: float = 30.0
) -> Literal["created", "updated", "unchanged"]:
    """Create the topic, or bring its retention/cleanup config to the spec. More partitions than declared is an
    error (Kafka cannot shrink a topic); fewer are added."""
    admin = _admin(bootstrap)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise TopicError(f"Kafka at {bootstrap} is unreachable ({exc}); is the stack up?") from exc
    existing = metadata.topics.get(spec.name)
    if existing is None:
        future = admin.create_topics(
            [NewTopic(spec.name, num_partitions=spec.partitions, replication_factor=1, config=spec.configs)]
        )[spec.name]
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            raise TopicError(f"creating topic {spec.name!r} failed: {exc}") from exc
        return "created"
    changed = False
    have = len(existing.partitions)
    if have > spec.partitions:
        raise TopicError(
            f"topic {spec.name!r} has {have} partitions but {spec.partitions} are declared; Kafka cannot shrink a "
            "topic: raise the declared count or recreate the topic"
        )
    if have < spec.partitions:
        admin.create_partitions([NewPartitions(spec.name, spec.partitions)])[spec.name].result(timeout=timeout)
        changed = True
    resource = ConfigResource(ResourceType.TOPIC, spec.name)
    current = admin.describe_configs([resource])[resource].result(timeout=timeout)
    if any(current[k].value != v for k, v in spec.configs.items()):
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in spec.configs.items()]
        admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, spec.name, incremental_configs=entries)])[
            resource
        ].result(timeout=timeout)
        changed = True
    return "updated" if changed else "unchanged"


def max_message_bytes(bootstrap: Kafka, topic: str, timeout: float = 10.0) -> int:
    """The largest record batch ``topic`` accepts now (its own setting, else the broker's default)."""
    admin = _admin(bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout=timeout)
    except KafkaException as exc:
        raise TopicError(f"reading the config of topic {topic!r} at {bootstrap} failed: {exc}") from exc
    return int(configs["max.message.bytes"].value)


def dead_letter_capacity(source_max_bytes: int) -> int:
    """What a dead-letter topic must accept to hold any record of its source whole: the raw value base64-encoded
    (4/3 of its size) in a JSON object with the source coordinates and a reason of at most 1,000 characters."""
    return source_max_bytes * 4 // 3 + 64 * 1024


def end_offsets(bootstrap: Kafka, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> high watermark (records ever written, for a topic never compacted or truncated)."""
    consumer = Consumer(
        KafkaConnection.of(bootstrap).client_config(**{"group.id": "lineage-lab-observer", "enable.auto.commit": False})
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return {}
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in sorted(metadata.partitions)
        }
    except KafkaException as exc:
        raise KafkaUnavailable(bootstrap, timeout, exc) from exc
    finally:
        consumer.close()


def committed_offsets(bootstrap: Kafka, topic: str, group: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """partition -> (the consumer group's committed offset, -1 for none; the partition's end offset)."""
    ends = end_offsets(bootstrap, topic, timeout)
    if not ends:
        return {}
    consumer = Consumer(KafkaConnection.of(bootstrap).client_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=timeout)
    except KafkaException as exc:
        raise KafkaUnavailable(bootstrap, timeout, exc) from exc
    finally:
        consumer.close()
    return {tp.partition: (tp.offset, ends[tp.partition]) for tp in committed}


def consumer_lag(bootstrap: Kafka, topic: str, group: str, timeout: float = 10.0) -> int | None:
    """Offsets of ``topic`` past what the consumer group committed; None when the group has no offsets (0 when the
    topic has never held a record: there is nothing to consume).

    A transactional producer (Debezium under Connect's exactly-once source support, Flink's exactly-once sinks)
    ends each transaction with a commit marker: an offset no consumer ever receives or commits past. A partition
    whose only offsets past the committed one are markers (or aborted records) is caught up: that is read, not
    guessed, with a read-committed probe at the committed offsets, so a caught-up group reads 0."""
    offsets = committed_offsets(bootstrap, topic, group, timeout)
    if not offsets:
        return None
    if all(committed < 0 for committed, _ in offsets.values()):
        return 0 if not any(end for _, end in offsets.values()) else None
    gaps = {p: end - max(committed, 0) for p, (committed, end) in offsets.items() if end > max(committed, 0)}
    caught_up = _no_committed_record_from(bootstrap, topic, {p: max(offsets[p][0], 0) for p in gaps}, timeout)
    return sum(gap for p, gap in gaps.items() if p not in caught_up)


def _no_committed_record_from(bootstrap: Kafka, topic: str, starts: dict[int, int], timeout: float) -> set[int]:
    """The partitions of ``starts`` where a read-committed consumer placed at the start offset reaches the end of
    the partition without receiving a record (only markers or aborted records lie between)."""
    if not starts:
        return set()
    consumer = Consumer(
        KafkaConnection.of(bootstrap).client_config(
            **{
                "group.id": "lineage-lab-observer",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 20,
                # a committed offset below the log start (records retention removed unread) is lag, not a jump
                "auto.offset.reset": "error",
            }
        )
    )
    undecided, empty = set(starts), set()
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        while undecided and time.monotonic() < deadline:
            msg = consumer.poll(min(1.0, max(deadline - time.monotonic(), 0.01)))
            if msg is None or msg.partition() not in undecided:
                continue
            undecided.discard(msg.partition())  # a committed record, or an offset out of range: real lag
            if msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF:
                empty.add(msg.partition())
    except KafkaException as exc:
        raise KafkaUnavailable(bootstrap, timeout, exc) from exc
    finally:
        consumer.close()
    return empty  # a partition still undecided at the deadline keeps its lag: never a false "caught up"


def has_committed_offsets(bootstrap: Kafka, topic: str, group: str, timeout: float = 10.0) -> bool:
    """Whether the consumer group committed an offset past the start of ``topic`` (it consumed something there)."""
    return any(committed > 0 for committed, _ in committed_offsets(bootstrap, topic, group, timeout).values())
