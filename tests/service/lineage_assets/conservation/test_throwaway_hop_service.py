"""docs/extending.md recipes 1 and 4 followed on the running stack with a throwaway connector: a second copy of
``orders`` into the archive bucket under ``throwaway/``, with a dead-letter topic of its own. The connector's file is
written where ``render_connector`` reads it (a scratch folder), its dataset and job are declared in memory as the
identity module declares its own (kind ``copy``, its dead letters named on the job), and nothing else is written:
no reader, no rule, not even its consumer group (the connector names its own with ``consumer.override.group.id``).
``reconcile`` must then balance the hop, and its figures must equal what the test's own readers
find (a boto3 listing with a GET of every object, read-committed consumers of ``orders`` and of the dead letters).
Everything the connector made is deleted at the end."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lineage_assets.checks.conservation import checked_hops
from lineage_assets.connect.client import ConnectClient
from lineage_assets.connect.configs import CONNECTORS_DIR, render_connector
from lineage_assets.conservation.reconcile import accept, reconcile
from lineage_assets.conservation.stores import Stores
from lineage_assets.lineage import naming
from lineage_assets.lineage.identity import Column, Dataset, Job, Pipeline, _identity_map
from tests.service.lineage_assets.conservation.conftest import (
    group_committed,
    judge_consumer,
    order_records,
    orders_below,
    private_stores,
)
from tests.support.connector_pause import connector_paused, states
from tests.support.engine_waits import wait_for

pytestmark = pytest.mark.service

NAME = "orders-s3-sink-throwaway"
#: the copy reads under a group of its own choosing (``consumer.override.group.id``), not Connect's connect-<name>:
#: reconcile must take it from the running connector
GROUP = f"{NAME}-readers"
DLQ = "orders-dlq-throwaway"
PREFIX = "throwaway/topics/orders/"


def with_throwaway(settings, base: Pipeline) -> Pipeline:
    """Recipe 1, steps 1-2 (recipe 4, step 3): the copy, its dead letters and its job, declared by hand."""
    orders = base.dataset("kafka_orders")
    copy = Dataset(
        "archive_orders_throwaway",
        *naming.s3(f"s3://{settings.archive_bucket}/{PREFIX.rstrip('/')}"),
        ("s3", "orders_archive_throwaway"),
        tuple(orders.columns),
        producer=NAME,
        description="A throwaway second archive of orders",
    )
    dead = Dataset(
        "dlq_orders_s3_sink_throwaway",
        *naming.kafka(settings.kafka_bootstrap, DLQ),
        ("kafka", "dead_letters", "orders_dlq_throwaway"),
        (Column("key", "bytes"), Column("value", "bytes")),
        producer=NAME,
        description="What the throwaway copy could not write",
    )
    job = Job(
        NAME,
        settings.openlineage_namespace,
        "STREAMING",
        "KAFKA_CONNECT",
        "JOB",
        ("kafka_orders",),
        (copy.key, dead.key),
        {copy.key: _identity_map("kafka_orders", [c.name for c in orders.columns])},
        "Connect S3 sink: a throwaway second archive",
        kind="copy",
        dead_letters=dead.key,
    )
    return Pipeline({**base.datasets, copy.key: copy, dead.key: dead}, {**base.jobs, NAME: job})


@pytest.fixture(scope="module")
def pipeline(settings) -> Pipeline:
    return with_throwaway(settings, Pipeline.from_settings(settings))


@pytest.fixture(scope="module")
def throwaway_stores(settings, pipeline, tmp_path_factory) -> Stores:
    return private_stores(settings, pipeline, tmp_path_factory.mktemp("counts"))


@pytest.fixture(scope="module")
def deployed(settings, throwaway_stores, s3, tmp_path_factory):
    """Recipe 4, steps 1 and 4: the connector's file (the archive sink's, its prefix, dead letters and rotation
    changed), rendered by ``render_connector`` and deployed; removed with all it made at the end."""
    folder = tmp_path_factory.mktemp("connectors")
    config = json.loads((CONNECTORS_DIR / "orders-s3-sink.json").read_text())
    config |= {
        "s3.prefix": "throwaway/",
        "errors.deadletterqueue.topic.name": DLQ,
        "rotate.interval.ms": "3000",
        "consumer.override.group.id": GROUP,
    }
    (folder / f"{NAME}.json").write_text(json.dumps(config))
    client = ConnectClient(settings.connect_url)
    client.deploy(NAME, render_connector(NAME, throwaway_stores.resources.connect, folder))
    try:
        wait_for(f"connector {NAME} and its tasks RUNNING", lambda: states(client, NAME) == {"RUNNING"})
        yield client
    finally:
        client.delete(NAME)
        wait_for(f"connector {NAME} gone", lambda: not states(client, NAME))
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.archive_bucket, Prefix="throwaway/"):
            keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
            if keys:  # a page is at most 1,000 keys, what one DeleteObjects takes (a stack with millions of orders
                # archives tens of thousands of objects under the copy's prefix)
                answer = s3.delete_objects(Bucket=settings.archive_bucket, Delete={"Objects": keys, "Quiet": True})
                assert not answer.get("Errors"), answer["Errors"][:3]
        admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
        wait_for(f"group {GROUP} deleted once its members left", lambda: group_deleted(admin))
        for future in admin.delete_topics([DLQ], operation_timeout=15).values():
            try:
                future.result(timeout=30)
            except Exception as exc:  # the copy dead-lettered nothing: Connect never created the topic
                assert "UNKNOWN_TOPIC" in str(exc), exc


def group_deleted(admin: AdminClient) -> bool:
    """Delete the copy's consumer group: True once gone, False while the stopped tasks' members still leave it."""
    for future in admin.delete_consumer_groups([GROUP], request_timeout=15).values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            if "NON_EMPTY_GROUP" in str(exc):
                return False
            assert "GROUP_ID_NOT_FOUND" in str(exc), exc
    return True


def lines_under(s3, bucket: str) -> dict[str, int]:
    """key -> lines of every object under the throwaway prefix, read by the test."""
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=PREFIX):
        for obj in page.get("Contents", []):
            found[obj["Key"]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().count(b"\n")
    return found


def dead_letters_below(settings, cut: dict[int, int]) -> int:
    """Distinct records of ``orders`` below ``cut`` that the throwaway's dead-letter topic holds (0: no topic)."""
    consumer = judge_consumer(settings)
    sources: set[tuple[int, int]] = set()
    try:
        meta = consumer.list_topics(DLQ, timeout=10).topics[DLQ]
        if meta.error is not None:
            return 0
        open_partitions = set(meta.partitions)
        consumer.assign([TopicPartition(DLQ, p, 0) for p in open_partitions])
        while open_partitions:
            msg = consumer.poll(10)
            assert msg is not None, f"{DLQ} did not answer"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                open_partitions.discard(msg.partition())
                continue
            headers = {k: v.decode() for k, v in msg.headers() or [] if v is not None}
            p, o = int(headers["__connect.errors.partition"]), int(headers["__connect.errors.offset"])
            if headers["__connect.errors.topic"] == "orders" and o < cut[p]:
                sources.add((p, o))
    finally:
        consumer.close()
    return len(sources)


def test_a_copy_declared_by_the_recipe_alone_is_reconciled(settings, pipeline, throwaway_stores, deployed, s3):
    assert NAME in [h.job.name for h in checked_hops(pipeline)], "the declared copy gets no conservation check"
    _, after_last = order_records(settings, {p: 0 for p in group_committed(settings, "orders", GROUP)})
    wait_for(
        f"group {GROUP} committed past the last record of orders as of the deploy",
        lambda: all(group_committed(settings, "orders", GROUP).get(p, 0) >= o for p, o in after_last.items()),
        deadline=300,
    )
    with connector_paused(settings, NAME):
        cut = group_committed(settings, "orders", GROUP)
        lines = lines_under(s3, settings.archive_bucket)
        (found,) = reconcile(throwaway_stores, jobs=[NAME], confirm_after_s=0)
        expected_in, expected_dead = orders_below(settings, cut), dead_letters_below(settings, cut)
    assert found.job == NAME and found.status in ("balanced", "pending"), found.summary()
    assert found.other_writers == (), found.summary()
    assert found.out == sum(lines.values()) > 0, (found.out, len(lines))
    assert found.dead_letters == expected_dead, found.summary()
    # paused after it committed everything it wrote: what is above its committed offsets is pending, unwritten
    assert found.in_ - found.pending == expected_in == found.out + found.dead_letters, found.summary()


def produce_foreign(settings, n: int) -> list[int]:
    """``n`` records straight into the copy's dead-letter topic, without Connect's error headers (another producer);
    their offsets in partition 0, from the delivery reports. The topic is made first when the copy dead-lettered
    nothing yet."""
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    for future in admin.create_topics([NewTopic(DLQ, 1, 1)], operation_timeout=15).values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            assert "TOPIC_ALREADY_EXISTS" in str(exc), exc
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    offsets: list[int] = []

    def delivered(err, msg) -> None:
        assert err is None, err
        offsets.append(msg.offset())

    for i in range(n):
        producer.produce(DLQ, key=f"stray-{i}".encode(), value=b"not a dead letter", partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and len(offsets) == n
    return sorted(offsets)


def test_records_another_producer_put_in_the_dead_letters_are_named_and_accepted(settings, throwaway_stores, deployed):
    """Three records produced straight into the copy's dead-letter topic name no record of ``orders``: they count in
    ``dead_letters`` (what the topic holds, whoever wrote it) and are named as one other writer under their first
    record, up to their last (the producer's delivery reports); accepted, they leave the figure and the hop
    balances as before. The connector is paused throughout, so nothing else moves but new orders (pending)."""
    with connector_paused(settings, NAME):
        (before,) = reconcile(throwaway_stores, jobs=[NAME], confirm_after_s=0)
        assert before.difference == 0 and before.other_writers == (), before.summary()
        offsets = produce_foreign(settings, 3)
        (found,) = reconcile(throwaway_stores, jobs=[NAME], confirm_after_s=0)
        assert found.dead_letters == before.dead_letters + 3, found.summary()
        assert (found.status, found.duplicates) == ("duplicates", 3), found.summary()
        (writer,) = found.other_writers
        namespace, name = naming.kafka(settings.kafka_bootstrap, DLQ)
        assert (writer.output, writer.figure, writer.rows) == (f"{namespace}/{name}", "dead_letters", 3)
        assert (writer.reference, writer.position) == (f"records:{DLQ}:0@{offsets[0]}", f"0@{offsets[-1]}")
        accept(throwaway_stores, NAME, [writer.reference], by="test")
        (after,) = reconcile(throwaway_stores, jobs=[NAME], confirm_after_s=0)
    assert (after.difference, after.dead_letters, after.other_writers) == (0, before.dead_letters, ()), after.summary()
    assert [w.reference for w in after.accepted] == [writer.reference]
