"""The orders-s3-sink hop on the running stack, judged by independent readers: a boto3 listing of the archive with a
GET of every object counting its lines, a read-committed confluent-kafka consumer counting ``orders`` below the
committed offsets of group ``connect-orders-s3-sink``, and one reading ``orders-dlq``'s error headers. Then fault (b),
an archive object deleted, must show as its lines missing with its offsets and key named, and fault (c), an object
copied under a second key, as its lines duplicated with the copy named; each is repaired and must clear.

A run lists only the shards where the sink writes and re-lists the old ones in rotation, so a fault in an old shard
(or outside every shard) is found within the rotation's period: the fault tests run reconciliations the way the
5-minute schedule does, until the fault shows, bounded by that period; a repair clears at the next run (the keys
found gone or named are looked at every run)."""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal

import boto3
import dagster as dg
import pytest
from botocore.config import Config
from confluent_kafka import Consumer, KafkaError, TopicPartition

from lineage_assets.conservation import archive, archive_listing
from lineage_assets.conservation.balance import HopBalance, StoreUnavailable
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.stores import Stores, count_store_path
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources
from tests.service.lineage_assets.conservation.conftest import group_committed, judge_consumer
from tests.support.connector_pause import connector_paused

pytestmark = pytest.mark.service

TOPIC, DLQ, GROUP, SINK = "orders", "orders-dlq", "connect-orders-s3-sink", "orders-s3-sink"
PREFIX = "topics/orders/"
KEY = re.compile(r"topics/orders/partition=(\d+)/orders\+(\d+)\+(\d{20})\.jsonl")


@pytest.fixture(scope="module", autouse=True)
def archive_has_objects(s3, bucket) -> None:
    """The sink uploads a partition's buffer at flush.size records or once its oldest record waited
    rotate.interval.ms (60 s): right after the main job the archive can still be empty for a minute."""
    deadline = time.monotonic() + 300
    while not s3.list_objects_v2(Bucket=bucket, Prefix=PREFIX, MaxKeys=1).get("KeyCount", 0):
        assert time.monotonic() < deadline, "the sink wrote no object within 300 s of the main job"
        time.sleep(5)


@pytest.fixture(scope="module")
def hop(stores):
    return hops(stores.pipeline)["orders-s3-sink"]


@pytest.fixture(scope="module")
def bucket(settings):
    return settings.archive_bucket


def _consumer(settings, **extra) -> Consumer:
    return judge_consumer(settings, **extra)


def committed(settings) -> dict[int, int]:
    return group_committed(settings, TOPIC, GROUP)


def read_all(settings, topic: str, handle) -> None:
    """Hand every committed record of ``topic`` to ``handle``, partition by partition, to the end now."""
    consumer = _consumer(settings)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        for p in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            done = False
            while not done:
                msg = consumer.poll(10)
                assert msg is not None, f"{topic}[{p}] did not answer"
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    done = True
                    continue
                handle(msg)
                done = msg.offset() + 1 >= high
    finally:
        consumer.close()


def orders_below(settings, cut: dict[int, int]) -> int:
    found = [0]

    def handle(msg) -> None:
        if msg.offset() < cut[msg.partition()]:
            found[0] += 1

    read_all(settings, TOPIC, handle)
    return found[0]


def dead_letters_below(settings, cut: dict[int, int]) -> int:
    sources: set[tuple[int, int]] = set()

    def handle(msg) -> None:
        headers = {k: v.decode() for k, v in msg.headers() or [] if v is not None}
        if headers.get("__connect.errors.topic") == TOPIC:
            p, o = int(headers["__connect.errors.partition"]), int(headers["__connect.errors.offset"])
            if o < cut[p]:
                sources.add((p, o))

    read_all(settings, DLQ, handle)
    return len(sources)


#: the test's own memory of objects it has read, by key and ETag (an object's content changes its ETag)
_READ: dict[tuple[str, str], int] = {}


def archive_lines(s3, bucket) -> dict[str, int]:
    """key -> lines, by listing the archive page by page and reading every object not read before."""
    lines = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=PREFIX):
        for obj in page.get("Contents", []):
            seen = (obj["Key"], obj["ETag"])
            if seen not in _READ:
                try:
                    body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                except s3.exceptions.NoSuchKey:
                    continue  # gone since the listing (``judged`` lists again and compares)
                _READ[seen] = body.count(b"\n")
            lines[obj["Key"]] = _READ[seen]
    return lines


@dataclass
class Judged:
    balance: HopBalance
    lines: dict[str, int]
    below_cut: int
    dead: int
    above_cut_lines: int


def judged(settings, stores, hop, s3, bucket, tries: int = 6) -> Judged:
    """The hop's balance and the independent figures, at a moment the sink committed nothing in between."""
    for _ in range(tries):
        cut = committed(settings)
        lines = archive_lines(s3, bucket)
        b = archive.balance(hop, stores)
        if committed(settings) != cut or archive_lines(s3, bucket) != lines:
            continue
        above = sum(
            n for k, n in lines.items() if (m := KEY.fullmatch(k)) and int(m.group(3)) >= cut.get(int(m.group(1)), 0)
        )
        return Judged(b, lines, orders_below(settings, cut), dead_letters_below(settings, cut), above)
    pytest.fail("the sink committed during every attempt to judge the hop")


def assert_balanced(j: Judged) -> None:
    b = j.balance
    assert b.status in ("balanced", "pending"), b.summary()
    assert b.other_writers == (), b.summary()
    assert b.out == sum(j.lines.values())
    assert b.dead_letters == j.dead
    # what the sink has committed, plus objects uploaded whose commit the cut did not see yet
    assert b.in_ - b.pending == j.below_cut + j.above_cut_lines


def test_hop_balances_now(settings, stores, hop, s3, bucket):
    j = judged(settings, stores, hop, s3, bucket)
    assert_balanced(j)
    assert j.lines, "the archive has no object: run the pipeline first"


def test_a_second_run_over_an_archive_that_did_not_change_reads_no_object_again(settings, stores, hop, s3, bucket):
    """The sink paused between two runs: the second lists the same objects, reads none of them and still agrees."""
    with connector_paused(settings, SINK):
        first = judged(settings, stores, hop, s3, bucket)
        assert_balanced(first)
        again = judged(settings, stores, hop, s3, bucket)
    assert again.lines == first.lines, "the archive changed while the sink was paused"
    assert_balanced(again)
    assert any("0 read now" in n for n in again.balance.notes), again.balance.notes


def rotation_runs(lines: dict[str, int]) -> int:
    """Runs within which every old shard and folder check is re-listed: each run re-lists at least
    ROTATION_KEYS - SHARD_KEYS keys of old shards (a shard holds at most SHARD_KEYS), or one folder check alone
    (three partition folders); one more for the run that starts mid-rotation."""
    folders = len({m.group(1) for k in lines if (m := KEY.fullmatch(k))})
    return math.ceil(len(lines) / (archive_listing.ROTATION_KEYS - archive_listing.SHARD_KEYS)) + folders + 1


def runs_until(stores, hop, status: str, limit: int) -> tuple[HopBalance, int]:
    """Reconcile the hop run after run (as the schedule does) until it reports ``status``, at most ``limit`` runs."""
    for run in range(1, limit + 1):
        b = archive.balance(hop, stores)
        if b.status == status:
            return b, run
    return b, limit


def _victim(lines: dict[str, int]) -> str:
    """The layout object with the most lines (a hole of its own size, not the tail of a partition only)."""
    return max((k for k in lines if KEY.fullmatch(k)), key=lambda k: (lines[k], k))


def test_deleted_object_is_missing_and_named(settings, stores, hop, s3, bucket):
    before = judged(settings, stores, hop, s3, bucket)
    assert_balanced(before)
    victim = _victim(before.lines)
    body = s3.get_object(Bucket=bucket, Key=victim)["Body"].read()
    n = body.count(b"\n")
    m = KEY.fullmatch(victim)
    partition, start = int(m.group(1)), int(m.group(3))
    try:
        s3.delete_object(Bucket=bucket, Key=victim)
        b, runs = runs_until(stores, hop, "missing", rotation_runs(before.lines))
        assert b.status == "missing", f"not found within {runs} runs: {b.summary()}"
        assert b.missing == n
        named = [w for w in b.other_writers if w.rows == -n]
        assert len(named) == 1, b.other_writers
        # the hole begins at the object's start; it ends later by the dead letters among its records
        assert f"offsets {start}.." in named[0].what and f"of partition {partition}:" in named[0].what
        assert victim in named[0].what and "deleted" in named[0].what
    finally:
        s3.put_object(Bucket=bucket, Key=victim, Body=body, ContentType="application/x-ndjson")
    # the key found gone is looked at every run: the repair clears at once
    assert_balanced(judged(settings, stores, hop, s3, bucket))
    assert archive.balance(hop, stores).status in ("balanced", "pending")


@pytest.mark.parametrize("copy_name", ["far start offset", "another name"])
def test_copied_object_is_duplicates_and_named(settings, stores, hop, s3, bucket, copy_name):
    before = judged(settings, stores, hop, s3, bucket)
    assert_balanced(before)
    victim = _victim(before.lines)
    body = s3.get_object(Bucket=bucket, Key=victim)["Body"].read()
    n = body.count(b"\n")
    m = KEY.fullmatch(victim)
    partition, start = int(m.group(1)), int(m.group(3))
    copy = (
        f"{PREFIX}partition={partition}/orders+{partition}+{start + 1_000_000_000:020d}.jsonl"
        if copy_name == "far start offset"
        else f"{PREFIX}partition={partition}/replayed-by-hand-{uuid.uuid4().hex[:6]}.jsonl"
    )
    try:
        s3.put_object(Bucket=bucket, Key=copy, Body=body, ContentType="application/x-ndjson")
        # outside every shard: found when the rotation checks the folder's other keys
        b, runs = runs_until(stores, hop, "duplicates", rotation_runs(before.lines))
        assert b.status == "duplicates", f"not found within {runs} runs: {b.summary()}"
        assert b.duplicates == n
        assert [(w.rows, w.ref) for w in b.other_writers] == [(n, f"object:{copy}")]
        assert copy in b.other_writers[0].what
    finally:
        s3.delete_object(Bucket=bucket, Key=copy)
    assert_balanced(judged(settings, stores, hop, s3, bucket))


def _one_cent_more(body: bytes) -> bytes:
    """The object with the first line whose price is a decimal of two places one cent dearer: as many lines."""
    lines = body.split(b"\n")
    for i, line in enumerate(lines):
        record = json.loads(line) if line else None
        if isinstance(record, dict) and re.fullmatch(r"\d+\.\d\d", str(record.get("price"))):
            record["price"] = str(Decimal(record["price"]) + Decimal("0.01"))
            lines[i] = json.dumps(record, separators=(",", ":")).encode()
            return b"\n".join(lines)
    pytest.fail("no line of the object has a price of two places")


def test_a_line_changed_with_its_count_unchanged_is_named_and_cleared_when_repaired(settings, stores, hop, s3, bucket):
    """Copies balance a checksum of their copied columns: a price changed by a cent in one archived line keeps
    every count and is found (within the rotation, as any change to an old shard), naming the object; put back,
    the named key is looked at every run and clears at once."""
    before = judged(settings, stores, hop, s3, bucket)
    assert_balanced(before)
    (weighed,) = before.balance.values
    assert weighed.column == "checksum" and weighed.in_ == weighed.out > 0, weighed.summary()
    victim = _victim(before.lines)
    body = s3.get_object(Bucket=bucket, Key=victim)["Body"].read()
    changed = _one_cent_more(body)
    assert changed.count(b"\n") == body.count(b"\n")
    try:
        s3.put_object(Bucket=bucket, Key=victim, Body=changed, ContentType="application/x-ndjson")
        b, runs = runs_until(stores, hop, "values_differ", rotation_runs(before.lines))
        assert b.status == "values_differ", f"not found within {runs} runs: {b.summary()}"
        assert b.other_writers == () and b.difference == 0, b.summary()  # every count still balances
        (found,) = b.values
        assert found.differs and len(found.where) == 1 and victim in found.where[0], found.summary()
    finally:
        s3.put_object(Bucket=bucket, Key=victim, Body=body, ContentType="application/x-ndjson")
    after = archive.balance(hop, stores)
    assert after.status in ("balanced", "pending") and not after.values[0].differs, after.summary()


def test_object_store_down_is_unavailable_naming_the_endpoint(settings, hop, tmp_path):
    pipeline = Pipeline.from_settings(settings)
    wanted = {k: v for k, v in build_resources(settings).items() if k in ("kafka", "object_store")}
    with dg.build_resources(wanted) as res:
        down = Stores(pipeline, res, count_store_path(settings))
        down.counts = CountStore(tmp_path / "c.sqlite")
        down.s3 = boto3.client(  # nothing listens on port 9 of loopback
            "s3",
            endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="x",
            aws_secret_access_key="y",
            region_name="us-east-1",
            config=Config(retries={"max_attempts": 1}, connect_timeout=2),
        )
        with pytest.raises(StoreUnavailable) as raised:
            archive.balance(hop, down)
    assert "http://127.0.0.1:9" in str(raised.value)
    assert "lineage-lab stack up object-store" in str(raised.value)
