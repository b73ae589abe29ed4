"""``consumer_lag`` on a topic written by transactional producers (Debezium under Connect's exactly-once source
support, Flink's exactly-once sinks): the commit and abort markers take offsets that no consumer receives or
commits past, so a caught-up group must read 0, and records after them must still count. The topic's layout is
built here by hand, so every expected figure below is written out, not computed."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lineage_assets.kafka.topics import consumer_lag

pytestmark = pytest.mark.service


@pytest.fixture
def topic(settings):
    name = f"test-lag-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)
    yield name
    admin.delete_topics([name])[name].result(30)


def transaction(settings, topic: str, n: int, commit: bool) -> None:
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "transactional.id": f"{topic}-{uuid.uuid4()}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, key=str(i), value=b"x")
    assert producer.flush(30) == 0  # on the broker before the end: an abort drops what is still queued
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def commit_group(settings, topic: str, group: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def end_offset(settings, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "judge"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def test_markers_and_aborted_records_past_the_committed_offset_are_no_lag(settings, topic):
    group = f"{topic}-group"
    bootstrap = settings.kafka_bootstrap
    transaction(settings, topic, 3, commit=True)  # records at 0, 1, 2; the commit marker at 3
    assert end_offset(settings, topic) == 4
    commit_group(settings, topic, group, 3)  # the group consumed the three records: it commits 3, never 4
    assert consumer_lag(bootstrap, topic, group) == 0

    transaction(settings, topic, 2, commit=False)  # aborted records at 4, 5; the abort marker at 6
    assert end_offset(settings, topic) == 7
    assert consumer_lag(bootstrap, topic, group) == 0  # nothing a read-committed consumer would receive

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key="plain", value=b"y")
    assert producer.flush(30) == 0  # a plain record at 7
    assert consumer_lag(bootstrap, topic, group) == 8 - 3  # a record to read: the offsets past 3 count

    commit_group(settings, topic, group, 8)
    assert consumer_lag(bootstrap, topic, group) == 0
