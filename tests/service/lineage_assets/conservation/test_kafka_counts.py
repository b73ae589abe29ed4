"""KafkaCounter on the real broker: committed records only (aborted transactions and their markers are not
records), resumed from its marks, and exact after retention deleted what it counted before. Expected counts are the
records this test itself produced, written out."""

import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.kafka_counts import KafkaCounter
from lineage_assets.kafka.connection import KafkaConnection

pytestmark = pytest.mark.service


@pytest.fixture
def topic(settings):
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    name = f"test-counts-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)
    yield name
    admin.delete_topics([name])[name].result(30)


def produce(settings, topic: str, n: int, transactional: str | None = None, abort: bool = False) -> None:
    conf = {"bootstrap.servers": settings.kafka_bootstrap}
    if transactional:
        conf["transactional.id"] = transactional
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=f"r{i}".encode(), partition=0)
    p.flush(30)  # on the broker before the transaction ends: an abort then leaves aborted records behind
    if transactional:
        (p.abort_transaction if abort else p.commit_transaction)(30)


def counter(settings, tmp_path) -> KafkaCounter:
    return KafkaCounter(KafkaConnection.from_settings(settings), CountStore(tmp_path / "counts.sqlite"))


def test_committed_records_only_resumed_from_marks_and_exact_after_retention(settings, topic, tmp_path):
    produce(settings, topic, 5)  # offsets 0-4
    produce(settings, topic, 3, transactional=f"t-{topic}-a", abort=True)  # 3 aborted records + an abort marker
    produce(settings, topic, 4, transactional=f"t-{topic}-c")  # 4 committed records + a commit marker
    c = counter(settings, tmp_path)
    _, end = c.offsets(topic)[0]
    assert end == 5 + 3 + 1 + 4 + 1  # offsets are not counts: 14 offsets, 9 records
    first = c.count(topic, {0: [5, end]})
    assert (first[(0, 5)].records, first[(0, end)].records) == (5, 9)

    produce(settings, topic, 6)
    _, end2 = c.offsets(topic)[0]
    assert c.count(topic, {0: [end2]})[(0, end2)].records == 15

    # retention: everything below the last mark deleted; the count below end2 stays exact, and new records add up
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})  # kept: its futures need it alive
    (deleted,) = admin.delete_records([TopicPartition(topic, 0, end2)]).values()
    assert deleted.result(30).low_watermark == end2
    produce(settings, topic, 2)
    _, end3 = c.offsets(topic)[0]
    found = c.count(topic, {0: [end2, end3]})
    assert (found[(0, end2)].records, found[(0, end3)].records) == (15, 17)

    # a fresh store (marks lost) counts what is left and says where its count begins
    fresh = counter(settings, tmp_path / "fresh")
    again = fresh.count(topic, {0: [end3]})[(0, end3)]
    assert (again.records, again.start, again.uncounted_before) == (2, end2, end2)


def test_a_broker_that_does_not_answer_is_named(tmp_path):
    dead = KafkaCounter(KafkaConnection(bootstrap="127.0.0.1:1"), CountStore(tmp_path / "c.sqlite"), timeout=2)
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1.*(stack up kafka|EXTERNAL_KAFKA)"):
        dead.offsets("orders")


def test_a_target_at_the_mark_read_from_keeps_its_count_when_the_read_adds_many_marks(settings, topic, tmp_path):
    """The fault test's archive once placed an object 43 records too low: its start was the mark the count resumed
    from, and the 100-odd marks that read added pushed that mark out of the store before it was looked up."""
    produce(settings, topic, 200)  # offsets 0-199, one record each
    c = counter(settings, tmp_path)
    assert c.count(topic, {0: [10]})[(0, 10)].records == 10  # a mark at offset 10
    targets = list(range(10, 200))  # more targets above the mark than the store keeps marks
    found = c.count(topic, {0: targets})
    assert {t: (found[(0, t)].upto, found[(0, t)].records) for t in (10, 11, 199)} == {
        10: (10, 10),
        11: (11, 11),
        199: (199, 199),
    }
