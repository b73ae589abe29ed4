"""The per-key audit (``reconcile --deep``) of the iceberg-ingestion and orders-s3-sink hops on the running stack,
over the last 2000 offsets of each partition, judged by the test's own readers: a read-committed confluent-kafka
consumer decoding the records' order_id (its own Avro decoding, schemas fetched from the registry with requests),
the DLQs read in full, a pyiceberg scan counting the rows of those ids, and a boto3 listing + GET of the archive
objects. Then one fault per output, injected into the audited (recent) records and repaired in ``finally``: 3 rows
of audited ids deleted from ``default.orders`` (named missing), and an archive object copied under the key of its
start offset + 1 (its lines doubled and mismatched, the copy named)."""

from __future__ import annotations

import io
import json
import re
from collections import Counter

import fastavro
import pytest
import requests
from confluent_kafka import KafkaError, TopicPartition
from pyiceberg.expressions import In

from lineage_assets.conservation import key_audit, key_audit_compare
from lineage_assets.conservation.hops import hops
from tests.service.lineage_assets.conftest import commit_retrying, wait_until_quiet
from tests.service.lineage_assets.conservation.conftest import group_committed, judge_consumer

pytestmark = pytest.mark.service

TOPIC, TABLE = "orders", "default.orders"
ICEBERG, ARCHIVE = "iceberg-ingestion", "orders-s3-sink"
GROUPS = {ICEBERG: "iceberg-ingestion", ARCHIVE: "connect-orders-s3-sink"}
DLQS = {ICEBERG: "orders-dlq-flink", ARCHIVE: "orders-dlq"}
LAST = 2000
KEY = re.compile(r"topics/orders/partition=(\d+)/orders\+(\d+)\+(\d{20})\.jsonl")


@pytest.fixture(scope="module")
def deep(stores, settings):
    """The module's stores set to audit the last 2000 offsets, once both hops have caught up (quiet for 15 s)."""
    wait_until_quiet(
        lambda: [group_committed(settings, TOPIC, g) for g in GROUPS.values()], "the hops' committed offsets"
    )
    stores.deep, stores.deep_range = True, {"last": LAST}
    return stores


def run(stores, job: str) -> key_audit_compare.KeyAudit:
    found = key_audit.run(hops(stores.pipeline)[job], stores)
    assert found is not None
    return found


# --- the judge's readers ----------------------------------------------------------------------------------------


class Decoder:
    """Confluent wire-format Avro: magic byte, 4-byte schema id, Avro body (writer schema from the registry)."""

    def __init__(self, url: str) -> None:
        self.url, self.schemas = url, {}

    def order_id(self, value: bytes | None) -> str | None:
        if not value or value[0] != 0:
            return None
        sid = int.from_bytes(value[1:5], "big")
        if sid not in self.schemas:
            text = requests.get(f"{self.url}/schemas/ids/{sid}", timeout=10).json()["schema"]
            self.schemas[sid] = fastavro.parse_schema(json.loads(text))
        return fastavro.schemaless_reader(io.BytesIO(value[5:]), self.schemas[sid])["order_id"]


def read_span(settings, partition: int, start: int, stop: int) -> dict[int, str | None]:
    """offset -> order_id of the committed records of orders[partition] in [start, stop)."""
    decoder, consumer, found = Decoder(settings.schema_registry_url), judge_consumer(settings), {}
    try:
        consumer.assign([TopicPartition(TOPIC, partition, start)])
        while True:
            msg = consumer.poll(10)
            assert msg is not None, f"{TOPIC}[{partition}] did not answer"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                break
            if msg.offset() >= stop:
                break
            found[msg.offset()] = decoder.order_id(msg.value())
    finally:
        consumer.close()
    return found


def dead_lettered(settings, job: str) -> set[tuple[int, int]]:
    """(partition, offset) of every record of orders the job's DLQ holds (read in full: it is small)."""
    consumer, found = judge_consumer(settings), set()
    dlq = DLQS[job]
    try:
        for p in sorted(consumer.list_topics(dlq, timeout=10).topics[dlq].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(dlq, p), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(dlq, p, low)])
            while True:
                msg = consumer.poll(10)
                assert msg is not None, f"{dlq} did not answer"
                if msg.error() is not None:
                    break
                if job == ICEBERG:
                    body = json.loads(msg.value())
                    if body.get("src_topic") == TOPIC:
                        found.add((int(body["src_partition"]), int(body["src_offset"])))
                else:
                    headers = dict(msg.headers() or [])
                    if headers.get("__connect.errors.topic") == TOPIC.encode():
                        found.add((int(headers["__connect.errors.partition"]), int(headers["__connect.errors.offset"])))
                if msg.offset() + 1 >= high:
                    break
    finally:
        consumer.close()
    return found


def expected_ids(settings, job: str, spans: dict[int, tuple[int, int]]) -> tuple[Counter, int, int]:
    """(order_id -> times in the spans, not dead-lettered; records read; dead-lettered records)."""
    dead = dead_lettered(settings, job)
    ids: Counter = Counter()
    records = dead_count = 0
    for p, (a, b) in spans.items():
        for offset, order_id in read_span(settings, p, a, b).items():
            records += 1
            if (p, offset) in dead:
                dead_count += 1
            else:
                ids[order_id] += 1
    return ids, records, dead_count


def assert_spans(found: key_audit_compare.KeyAudit, settings, job: str) -> None:
    """The audited spans: the last 2000 offsets (or those from the log start) below the group's committed offsets
    (read here, after the audit: a hop may have gone on since)."""
    committed = group_committed(settings, TOPIC, GROUPS[job])
    assert sorted(found.spans) == sorted(committed)
    probe = judge_consumer(settings)
    try:
        low = {p: probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[0] for p in committed}
    finally:
        probe.close()
    for p, (a, b) in found.spans.items():
        assert b - a == min(LAST, b - low[p]) and b <= committed[p], (p, a, b, committed[p])


def table_counts(catalog, ids) -> Counter:
    table = catalog.load_table(TABLE)
    return Counter(
        table.scan(row_filter=In("order_id", sorted(ids)), selected_fields=("order_id",))
        .to_arrow()
        .column("order_id")
        .to_pylist()
    )


# --- nothing wrong ------------------------------------------------------------------------------------------------


def test_iceberg_range_is_whole(deep, settings):
    found = run(deep, ICEBERG)
    assert_spans(found, settings, ICEBERG)
    ids, records, dead = expected_ids(settings, ICEBERG, found.spans)
    assert None not in ids  # every record of the range decodes or was dead-lettered
    held = table_counts(deep.catalog, ids)
    # the judge: every id of the range held as many times as the range has it, no more
    assert {k: n for k, n in ids.items() if held.get(k, 0) != n} == {}
    assert sum(held.values()) == sum(ids.values()) == records - dead
    assert (found.records, found.dead_lettered, found.undecoded) == (records, dead, 0)
    assert found.missing == [] and found.doubled == [], found.notes
    (note,) = key_audit.audit(hops(deep.pipeline)[ICEBERG], deep)
    assert "0 missing, 0 doubled" in note and f"{records} records" in note


def archive_objects(s3, bucket: str, partition: int, lo: int, hi: int) -> dict[str, int]:
    """key -> start offset of the sink's objects of ``partition`` starting in [lo, hi) (a boto3 listing)."""
    found = {}
    low, high = str(max(lo, 0)).zfill(20), str(hi).zfill(20)
    digits = next((low[:i] for i in range(20) if low[i] != high[i]), low)
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=f"topics/orders/partition={partition}/orders+{partition}+{digits}"
    ):
        for obj in page.get("Contents", []):
            m = KEY.fullmatch(obj["Key"])
            if m and lo <= int(m.group(3)) < hi:
                found[obj["Key"]] = int(m.group(3))
    return found


def test_archive_range_is_whole(deep, settings, s3):
    found = run(deep, ARCHIVE)
    assert_spans(found, settings, ARCHIVE)
    ids, records, dead = expected_ids(settings, ARCHIVE, found.spans)
    # the judge: the lines of the objects starting in the span (and up to 1000 offsets before it) hold each id of
    # the span exactly as often as the span has it
    lines: Counter = Counter()
    for p, (a, b) in found.spans.items():
        for key in archive_objects(s3, settings.archive_bucket, p, a - 1000, b):
            body = s3.get_object(Bucket=settings.archive_bucket, Key=key)["Body"].read()
            lines.update(json.loads(line)["order_id"] for line in body.splitlines() if line.strip())
    assert {k: n for k, n in ids.items() if lines.get(k, 0) != n} == {}
    assert (found.records, found.dead_lettered) == (records, dead)
    assert found.missing == [] and found.doubled == [] and found.mismatched == [], found.notes
    assert found.objects  # the objects read are named


# --- faults ---------------------------------------------------------------------------------------------------------


def test_rows_deleted_from_iceberg_are_named_missing_then_clear(deep, settings):
    before = run(deep, ICEBERG)
    partition = max(before.spans)
    a, b = before.spans[partition]
    table = deep.catalog.load_table(TABLE)
    # 3 ids of the audited records, from the middle of the span, that the table holds once each
    span_ids = [i for i in read_span(settings, partition, a + LAST // 2, b).values() if i is not None]
    held = table_counts(deep.catalog, span_ids[:50])
    ids = [i for i in span_ids[:50] if held.get(i) == 1][:3]
    assert len(ids) == 3, held
    rows = table.scan(row_filter=In("order_id", ids)).to_arrow()
    assert rows.num_rows == 3
    deleted = False
    try:
        commit_retrying(table, lambda t: t.delete(delete_filter=In("order_id", ids)))
        deleted = True
        assert table_counts(deep.catalog, ids) == Counter()  # the judge: gone from the table
        found = run(deep, ICEBERG)
        assert set(ids) <= set(found.missing), found.notes
        assert found.doubled == [], found.notes
        (note,) = key_audit.audit(hops(deep.pipeline)[ICEBERG], deep)
        assert all(i in note for i in ids), note
    finally:
        if deleted:  # the repair: the same 3 rows, as the scan returned them
            commit_retrying(deep.catalog.load_table(TABLE), lambda t: t.append(rows))
    assert table_counts(deep.catalog, ids) == Counter({i: 1 for i in ids})
    after = run(deep, ICEBERG)
    assert not set(ids) & set(after.missing), after.notes
    assert after.doubled == [], after.notes


def victim(s3, bucket: str, spans: dict[int, tuple[int, int]]) -> tuple[int, str, int]:
    """(partition, key, start) of the earliest object starting inside an audited span with at least two offsets of
    the span after its start (so the copy's shifted lines land on audited records), from the longest span first:
    on a nearly empty stack a span is short and some partitions hold a single object."""
    for p, (a, b) in sorted(spans.items(), key=lambda kv: kv[1][0] - kv[1][1]):
        starts = sorted(archive_objects(s3, bucket, p, a, b - 2).items(), key=lambda kv: kv[1])
        if starts:
            return p, *starts[0]
    raise AssertionError(f"no archive object starts inside the audited spans {spans}")


def test_an_archive_object_copied_one_offset_later_is_named_then_clears(deep, settings, s3):
    bucket = settings.archive_bucket
    before = run(deep, ARCHIVE)
    partition, key, start = victim(s3, bucket, before.spans)
    b = before.spans[partition][1]
    copy = f"topics/orders/partition={partition}/orders+{partition}+{start + 1:020d}.jsonl"
    assert copy not in archive_objects(s3, bucket, partition, start, start + 2)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    lines = [json.loads(line)["order_id"] for line in body.splitlines() if line.strip()]
    assert len(lines) >= 2
    records = read_span(settings, partition, start, b)
    dead = dead_lettered(settings, ARCHIVE)
    placed = [o for o in sorted(records) if (partition, o) not in dead]
    # the judge: the copy's line i lands on the i-th written record at or after start + 1
    landing = [o for o in placed if o >= start + 1][: len(lines)]
    differ = [o for o, line_id in zip(landing, lines, strict=False) if records[o] != line_id]
    assert differ  # the copy shifted by one offset says other ids than the records
    try:
        s3.copy_object(Bucket=bucket, Key=copy, CopySource={"Bucket": bucket, "Key": key})
        found = run(deep, ARCHIVE)
        doubled = {d.split(" in ")[0]: d for d in found.doubled}  # "orders[p]@o in key and key"
        for o in landing:
            assert copy in doubled[f"{TOPIC}[{partition}]@{o}"], found.notes
        mismatched = {m.split(" in ")[0] for m in found.mismatched if f" in {copy} " in m}
        assert mismatched == {f"{TOPIC}[{partition}]@{o}" for o in differ}, found.notes
        assert copy in found.objects_named and found.missing == [], found.notes
        (note,) = key_audit.audit(hops(deep.pipeline)[ARCHIVE], deep)
        assert copy in note, note
    finally:
        s3.delete_object(Bucket=bucket, Key=copy)
    after = run(deep, ARCHIVE)
    assert after.doubled == [] and after.mismatched == [] and after.missing == [], after.notes
    assert copy not in after.objects
