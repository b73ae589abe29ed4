"""The per-key audit (``lineage-lab reconcile --deep``) of the iceberg-ingestion and orders-s3-sink hops.

Counts at one cut can hide a loss behind a duplicate of the same size. This audit compares record by record over a
chosen range of ``orders`` (``Stores.deep_range``: ``{"last": N}``, the last N offsets of each partition below the
hop's committed consumer offsets, or ``{"partition": p, "from": a, "to": b}``), so it reads what the counts never
read: the records' values, the output's keys. It is run on demand, never by the sensor's checks.

- The range: records read read-committed; each value's ``order_id`` decoded (Confluent Avro, schema by id).
  A record the hop dead-lettered (its DLQ, read from the first DLQ record as recent as the range's oldest record: a
  dead letter is never older than its record) or a tombstone (the sink skips those) is expected in no output.
- Iceberg ``default.orders``: the rows whose order_id is one of the range's, counted per id, against the times the
  id occurs in the range (Debezium may re-send a change). Fewer -> missing ids, more -> doubled ids. The table is
  read after the range (so the checkpoint that committed the offsets has committed its snapshot), and ids found
  missing are looked up again in the table's newest snapshot before they are reported.
- The archive: the objects whose start offset lies in the range (and those just before it, to cover its first
  records) are read; line i of an object starting at offset s is the i-th record at or after s that was neither
  dead-lettered nor a tombstone. An offset no line covers is missing, one covered by two objects doubled, a line
  whose order_id is not the record's mismatched. Where offsets skip (markers, aborted records), the range is also
  read uncommitted, as Connect's sink consumer reads it, so lines land on the records the sink wrote them for.

Cost (10 000 offsets per partition, 3 partitions, 4M orders): Kafka about 1 s; Iceberg reads the order_id column
of the files whose bounds meet the ids' smallest and largest value (ids in order, as the benchmark's: a few files;
random UUIDs: the whole column, about 1.3 s per 4M rows) -- an ``In`` of 30 000 literals costs pyiceberg about 1 s
per data file to bind, so ids are matched in Arrow; the archive: narrow listings by start-offset prefix and one GET
per object (about 330).
"""

from __future__ import annotations

import bisect
import json
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from botocore.exceptions import BotoCoreError, ClientError
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from lineage_assets.conservation import iceberg_ingestion_hop as iceberg_hop
from lineage_assets.conservation.archive_keys import OFFSET_DIGITS, place_of
from lineage_assets.conservation.archive_listing import s3_unavailable
from lineage_assets.conservation.archive_objects import ERROR_OFFSET, ERROR_PARTITION, ERROR_TOPIC
from lineage_assets.conservation.avro_values import AvroValues
from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores

ICEBERG_JOB = "iceberg-ingestion"
ARCHIVE_JOB = "orders-s3-sink"
#: the range audited when none is chosen: the last N offsets of each partition
DEFAULT_LAST = 10_000
#: examples named per kind of finding
EXAMPLES = 5
#: seconds without a record or the end of a partition before Kafka counts as not answering
_STALL_S = 15.0
#: how far before the range the archive is first searched for the object holding its first records (offsets)
_LOOKBACK = 1_000
_THREADS = 8
#: doubled ids whose copies are searched for in the records after the range, at most this many offsets per partition
_AFTER_LIMIT = 200_000

Position = tuple[int, int]  # (partition, offset)


# ---------------------------------------------------------------------------------------------------------------
# Pure logic


def spans_of(
    deep_range: Mapping[str, Any], committed: Mapping[int, int], log_start: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """partition -> [from, to) offsets to audit, below the committed offsets ``committed`` (what the hop has taken
    over: records at or above are pending, not lost) and at or above the log start."""
    spans: dict[int, tuple[int, int]] = {}
    last = int(deep_range.get("last") or DEFAULT_LAST)
    for p in sorted(committed):
        if "partition" in deep_range and int(deep_range["partition"]) != p:
            continue
        top = committed[p]
        a = max(int(deep_range.get("from", top - last)), log_start.get(p, 0))
        b = min(int(deep_range.get("to", top)), top)  # the group never committed here (-1001): b < 0 <= a
        if a < b:
            spans[p] = (a, b)
    return spans


def compare_counts(expected: Mapping[str, int], found: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(id -> copies missing, id -> copies too many) of the ids ``expected`` names, found ``found`` times."""
    missing = {k: n - found.get(k, 0) for k, n in expected.items() if found.get(k, 0) < n}
    doubled = {k: found[k] - n for k, n in expected.items() if found.get(k, 0) > n}
    return missing, doubled


def decimal_prefixes(lo: int, hi: int, width: int = OFFSET_DIGITS) -> list[str]:
    """Zero-padded decimal prefixes, in order, whose numbers are exactly [lo, hi): narrow listings of the sink's
    keys by start offset (s3proxy reads the metadata of every key under a listing's prefix, so a wide prefix costs
    every key of the folder)."""
    found: list[str] = []

    def split(prefix: str, start: int, size: int) -> None:
        end = start + size
        if start >= hi:
            return
        if end <= lo:  # pragma: no mutate (end < lo: a block ending at lo is split further, none of it kept)
            return
        if lo <= start and end <= hi:
            found.append(prefix)
            return
        step = size // 10
        for d in range(10):
            split(prefix + str(d), start + d * step, step)

    if lo < hi:  # pragma: no mutate (lo <= hi: an empty range splits down to nothing, [] the same)
        split("", 0, 10**width)
    return found


@dataclass
class ArchiveFindings:
    """One partition of the archive compared with the records: lists of offsets (and the keys involved)."""

    #: offsets in the span that no line holds
    missing: list[int] = field(default_factory=list)
    #: offset -> the keys of the objects whose lines hold it (two or more)
    doubled: dict[int, list[str]] = field(default_factory=dict)
    #: (offset, key, line number from 1, the line's order_id, the record's order_id)
    mismatched: list[tuple[int, str, int, str | None, str | None]] = field(default_factory=list)
    #: lines beyond the records read (past the span: not judged)
    beyond: int = 0
    #: offsets in the span held by exactly one line
    held: int = 0
    #: lines on records of aborted transactions (the sink reads uncommitted): placed, not judged
    aborted: int = 0


def compare_archive(
    span: tuple[int, int],
    records: Mapping[int, str | None],
    objects: Mapping[str, tuple[int, list[str | None]]],
    aborted: Collection[int] = (),
) -> ArchiveFindings:
    """Compare objects (key -> (start offset, the order_id of each line)) with ``records`` (offset -> order_id, the
    records the sink writes a line for: dead letters and tombstones left out, read from at least the first object's
    start up to the span's end). Line i of an object starting at s holds the i-th record at or after s. ``aborted``:
    offsets among ``records`` of aborted transactions (Connect's sink consumer reads uncommitted, so it writes them):
    they take a line, but only committed records are judged."""
    a, b = span
    aborted = set(aborted)
    eligible = sorted(records)
    holders: dict[int, list[str]] = {}
    found = ArchiveFindings()
    for key, (start, lines) in sorted(objects.items(), key=lambda kv: (kv[1][0], kv[0])):
        first = bisect.bisect_left(eligible, start)
        for i, line_id in enumerate(lines):
            if first + i >= len(eligible):
                found.beyond += len(lines) - i
                break
            offset = eligible[first + i]
            if not a <= offset < b:
                if offset >= b:
                    found.beyond += 1
                continue
            if offset in aborted:
                found.aborted += 1
                continue
            holders.setdefault(offset, []).append(key)
            expected = records[offset]
            if expected is not None and line_id != expected:
                found.mismatched.append((offset, key, i + 1, line_id, expected))
    for offset in eligible[bisect.bisect_left(eligible, a) : bisect.bisect_left(eligible, b)]:
        if offset in aborted:
            continue
        keys = holders.get(offset, [])
        if not keys:
            found.missing.append(offset)
        elif len(keys) > 1:
            found.doubled[offset] = keys
        else:
            found.held += 1
    return found


def key_runs(by_offset: Mapping[int, list[str]]) -> list[tuple[int, int, list[str]]]:
    """Consecutive offsets held by the same keys, as (first, last, keys) runs."""
    runs: list[tuple[int, int, list[str]]] = []
    for o in sorted(by_offset):
        if runs and runs[-1][1] + 1 == o and runs[-1][2] == by_offset[o]:
            runs[-1] = (runs[-1][0], o, runs[-1][2])
        else:
            runs.append((o, o, by_offset[o]))
    return runs


def _examples(items: Iterable[str], total: int | None = None) -> str:
    shown = list(items)[:EXAMPLES]
    if not shown:
        return ""
    more = (total if total is not None else len(shown)) > len(shown)
    return f" ({', '.join(shown)}{' ...' if more else ''})"


def _audited(hop: Hop, topic: str, spans, stores: Stores, group: str, result: KeyAudit) -> str:
    """The head every audit's note begins with: the range read and what of it the dead letters explain."""
    dlq = hop.dead_letters.name if hop.dead_letters else "no DLQ"
    return (
        f"deep audit of {describe_spans(topic, spans)} ({_chosen(stores.deep_range)} below group {group}'s "
        f"committed offsets): {result.records} records, {result.dead_lettered} dead-lettered in {dlq}"
    )


def _chosen(deep_range: Mapping[str, Any]) -> str:
    if "partition" in deep_range or "from" in deep_range or "to" in deep_range:
        return "the chosen offsets, clipped to the log start and"
    return f"the last {int(deep_range.get('last') or DEFAULT_LAST)} offsets of each partition"


def describe_spans(topic: str, spans: Mapping[int, tuple[int, int]]) -> str:
    return " ".join(f"{topic}[{p}]@{a}..{b - 1}" for p, (a, b) in sorted(spans.items())) or "no records"


def offset_spans(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted offsets as [first, last] runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for o in sorted(offsets):
        if runs and runs[-1][1] + 1 == o:
            runs[-1] = (runs[-1][0], o)
        else:
            runs.append((o, o))
    return runs


# ---------------------------------------------------------------------------------------------------------------
# The result


@dataclass
class KeyAudit:
    """What the per-key audit of one hop found; ``notes`` is what it adds to the hop's balance."""

    job: str
    topic: str
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: committed records read in the spans
    records: int = 0
    dead_lettered: int = 0
    tombstones: int = 0
    #: records neither dead-lettered nor decodable (their id is unknown: not judged)
    undecoded: int = 0
    #: keys expected in no output copy (Iceberg: order_ids; the archive: "topic[p]@offset")
    missing: list[str] = field(default_factory=list)
    #: keys held more often than the range explains
    doubled: list[str] = field(default_factory=list)
    #: archive lines whose order_id is not the record's ("topic[p]@offset in key: line says X, record Y")
    mismatched: list[str] = field(default_factory=list)
    #: archive objects read
    objects: list[str] = field(default_factory=list)
    #: archive objects holding a doubled offset or a mismatched line
    objects_named: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not (self.missing or self.doubled or self.mismatched)


# ---------------------------------------------------------------------------------------------------------------
# Reading Kafka


@dataclass(frozen=True)
class RangeRecord:
    offset: int
    order_id: str | None
    tombstone: bool
    timestamp_ms: int


def _consumer(stores: Stores, name: str, committed_only: bool = True) -> Consumer:
    return Consumer(
        stores.kafka.connection.client_config(
            **{
                "group.id": f"lineage-lab-reconcile-deep-{name}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed" if committed_only else "read_uncommitted",
                "auto.offset.reset": "earliest",
            }
        )
    )


def _read(consumer: Consumer, topic: str, partition: int, start: int, stop: int, bootstrap: str):
    """Committed records of ``topic[partition]`` in [start, stop), in offset order."""
    if start >= stop:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    quiet_since = time.monotonic()
    try:
        while True:
            batch = consumer.consume(5000, timeout=0.2)
            if not batch:
                if time.monotonic() - quiet_since > _STALL_S:
                    raise StoreUnavailable(
                        f"Kafka at {bootstrap}: reading {topic}[{partition}] from {start} gave no record and no end "
                        f"in {_STALL_S:.0f} s (deep audit); check the broker, then reconcile again"
                    )
                continue
            quiet_since = time.monotonic()
            for msg in batch:
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    return
                if err is not None:
                    raise StoreUnavailable(f"Kafka at {bootstrap}: reading {topic}[{partition}] failed: {err}")
                if msg.offset() >= stop:
                    return
                yield msg
                if msg.offset() + 1 >= stop:
                    return
    except KafkaException as exc:
        raise StoreUnavailable(
            f"Kafka at {bootstrap} did not answer during the deep audit ({exc}); start the broker, then reconcile again"
        ) from exc


def read_range(
    stores: Stores, topic: str, spans: Mapping[int, tuple[int, int]], committed_only: bool = True
) -> dict[int, list[RangeRecord]]:
    """partition -> the committed records of the span (all records, aborted ones too, when not ``committed_only``),
    their order_id decoded (None: not Confluent Avro)."""
    avro = AvroValues(stores.resources.kafka.registry())
    consumer = _consumer(stores, "range", committed_only)
    found: dict[int, list[RangeRecord]] = {}
    try:
        for p, (a, b) in sorted(spans.items()):
            rows = found.setdefault(p, [])
            for msg in _read(consumer, topic, p, a, b, stores.kafka.connection.bootstrap):
                value = msg.value()
                record = avro.decode(value) if value is not None else None
                order_id = record.get("order_id") if record else None
                rows.append(
                    RangeRecord(
                        msg.offset(), str(order_id) if order_id is not None else None, value is None, msg.timestamp()[1]
                    )
                )
    finally:
        consumer.close()
    return found


def read_dead_letters(stores: Stores, dlq: str, source_of, since_ms: int) -> dict[tuple[int, int], str]:
    """(source partition, source offset) -> where the dead letter is (``dlq[p]@o``), for every DLQ record at or after
    the first whose timestamp is ``since_ms`` or later (a dead letter is written after its record: Connect keeps the
    record's timestamp, Flink stamps the time it writes). ``source_of(msg)`` -> (partition, offset) or None."""
    ranges = stores.kafka.offsets(dlq)
    consumer = _consumer(stores, "dlq")
    found: dict[tuple[int, int], str] = {}
    try:
        try:
            starts = consumer.offsets_for_times(
                [TopicPartition(dlq, p, max(since_ms, 0)) for p in ranges], timeout=stores.kafka.timeout
            )
        except KafkaException as exc:
            raise StoreUnavailable(f"Kafka did not answer for the offsets of {dlq} by time ({exc})") from exc
        for tp in starts:
            low, end = ranges[tp.partition]
            start = end if tp.offset < 0 else max(tp.offset, low)
            for msg in _read(consumer, dlq, tp.partition, start, end, stores.kafka.connection.bootstrap):
                source = source_of(msg)
                if source is not None:
                    found.setdefault(source, f"{dlq}[{msg.partition()}]@{msg.offset()}")
    finally:
        consumer.close()
    return found


def _flink_source(topic: str):
    def source_of(msg) -> tuple[int, int] | None:
        return iceberg_hop.dead_letter_source(msg.value(), topic)

    return source_of


def _connect_source(topic: str):
    def source_of(msg) -> tuple[int, int] | None:
        headers = {k: (v.decode("utf-8", "replace") if v is not None else None) for k, v in msg.headers() or []}
        if headers.get(ERROR_TOPIC) != topic:
            return None
        try:
            return int(headers[ERROR_PARTITION] or ""), int(headers[ERROR_OFFSET] or "")
        except (KeyError, ValueError):
            return None

    return source_of


def _skips(rows: list[RangeRecord], start: int, stop: int) -> bool:
    """Whether the committed records of [start, stop) leave offsets out (markers or aborted records between them)."""
    return len(rows) != stop - start


def _oldest_ms(records: Mapping[int, list[RangeRecord]]) -> int:
    return min((r.timestamp_ms for rows in records.values() for r in rows if r.timestamp_ms > 0), default=0)


# ---------------------------------------------------------------------------------------------------------------
# iceberg-ingestion


def _count_ids(table, ids: set[str], snapshot_id: int | None = None) -> tuple[Counter[str], int]:
    """(order_id -> rows of the table holding it, rows read). The scan is bounded by the ids' smallest and largest
    value (pyiceberg prunes files by their order_id bounds with two literals; binding an ``In`` of thousands of
    literals costs about a second per data file), and the ids are matched in Arrow."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual

    counts: Counter[str] = Counter()
    if not ids:
        return counts, 0
    wanted = pa.array(sorted(ids), pa.string())
    bounds = And(GreaterThanOrEqual("order_id", min(ids)), LessThanOrEqual("order_id", max(ids)))
    scan = table.scan(row_filter=bounds, selected_fields=("order_id",), snapshot_id=snapshot_id)
    read = 0
    for batch in scan.to_arrow_batch_reader():
        column = batch.column(batch.schema.get_field_index("order_id"))
        read += len(column)
        counts.update(column.filter(pc.is_in(column, value_set=wanted)).to_pylist())
    return counts, read


def _scanned(stores: Stores, table_name: str, scan):
    """``scan()``, a failure of the catalog or the object store raised as the store not answering."""
    try:
        return scan()
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise iceberg_hop._catalog_unavailable(stores, f"scanning {table_name} (deep audit)", exc) from exc


def audit_iceberg(hop: Hop, stores: Stores) -> KeyAudit:
    began = time.monotonic()
    topic = hop.input.name
    table_name = hop.output.symlinks[0].name if hop.output.symlinks else "default.orders"
    group, _ = iceberg_hop.group_id(stores)
    ranges = stores.kafka.offsets(topic)
    committed = stores.kafka.committed(topic, group, sorted(ranges))
    spans = spans_of(stores.deep_range, committed, {p: lo for p, (lo, _) in ranges.items()})
    result = KeyAudit(hop.job.name, topic, spans)
    records = read_range(stores, topic, spans)
    dead = (
        read_dead_letters(stores, hop.dead_letters.name, _flink_source(topic), _oldest_ms(records))
        if hop.dead_letters is not None
        else {}
    )
    expected: Counter[str] = Counter()
    for p, rows in records.items():
        for r in rows:
            result.records += 1
            if (p, r.offset) in dead:
                result.dead_lettered += 1
            elif r.order_id is None:
                result.undecoded += 1  # the job neither dead-lettered it nor can we say its id
            else:
                expected[r.order_id] += 1

    # the table is loaded after the range was read: the snapshot of the checkpoint that committed the offsets has
    # had the time of the read to land
    table = iceberg_hop._load_table(stores, table_name)
    snapshot = table.current_snapshot()
    snapshot_id = snapshot.snapshot_id if snapshot else None
    found, rows_read = _scanned(stores, table_name, lambda: _count_ids(table, set(expected), snapshot_id))
    missing, doubled = compare_counts(expected, found)
    late = 0
    if missing:  # committed offsets can come before the snapshot of their checkpoint: look again at the newest
        table = iceberg_hop._load_table(stores, table_name)
        newest = table.current_snapshot()
        if newest is not None and newest.snapshot_id != snapshot_id:
            again, _ = _scanned(stores, table_name, lambda: _count_ids(table, set(missing), newest.snapshot_id))
            still = {k: n for k, n in missing.items() if again.get(k, 0) < expected[k]}
            late = len(missing) - len(still)
            missing = {k: expected[k] - again.get(k, 0) for k in still}
    copies_after = 0
    if doubled:  # a copy may come from a re-send after the range (Debezium is at-least-once): count those
        after = {p: (b, min(ranges[p][1], b + _AFTER_LIMIT)) for p, (_, b) in spans.items()}
        for rows in read_range(stores, topic, after).values():
            for r in rows:
                if r.order_id in doubled:
                    copies_after += 1
                    doubled[r.order_id] -= 1
        doubled = {k: n for k, n in doubled.items() if n > 0}

    result.missing = sorted(missing)
    result.doubled = sorted(doubled)
    result.seconds = round(time.monotonic() - began, 2)
    result.notes = [
        _audited(hop, topic, spans, stores, group, result)
        + f", {result.undecoded} neither decodable nor dead-lettered (not judged); {len(expected)} order_ids "
        f"({sum(expected.values())} expected rows) looked up in {table_name} at snapshot {snapshot_id} "
        f"({rows_read} rows read between the ids' bounds): {len(missing)} missing"
        + _examples((f"{k}" + (f" x{n}" if n > 1 else "") for k, n in sorted(missing.items())), len(missing))
        + f", {len(doubled)} doubled"
        + _examples((f"{k} +{n}" for k, n in sorted(doubled.items())), len(doubled))
        + (f"; {late} found only in the newer snapshot (late, not missing)" if late else "")
        + (f"; {copies_after} copies explained by re-sends after the range" if copies_after else "")
        + ("; a doubled id may also be a re-send before the range (audit a wider range to tell)" if doubled else "")
        + f" ({result.seconds:.1f} s)"
    ]
    return result


# ---------------------------------------------------------------------------------------------------------------
# orders-s3-sink


def _list_starts(stores: Stores, bucket: str, folder: str, lo: int, hi: int, endpoint: str) -> dict[str, str]:
    """key -> ETag of the objects under ``folder`` (``<prefix>partition=p/<topic>+p+``) starting in [lo, hi)."""

    def listed(digits: str) -> list[tuple[str, str]]:
        out, args = [], {"Bucket": bucket, "Prefix": folder + digits, "MaxKeys": 1000}
        while True:
            try:
                response = stores.s3.list_objects_v2(**args)
            except (BotoCoreError, ClientError) as exc:
                raise s3_unavailable(endpoint, f"listing s3://{bucket}/{folder}{digits}", exc) from exc
            out += [(o["Key"], o["ETag"]) for o in response.get("Contents", [])]
            if not response.get("IsTruncated"):
                return out
            args["ContinuationToken"] = response["NextContinuationToken"]

    with ThreadPoolExecutor(4) as pool:
        return dict(kv for found in pool.map(listed, decimal_prefixes(lo, hi)) for kv in found)


def _object_ids(stores: Stores, bucket: str, key: str, endpoint: str) -> list[str | None] | None:
    """The order_id of each JSON line of an object (None for a line that is no JSON object); None: gone."""
    try:
        body = stores.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
    except BotoCoreError as exc:
        raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
    ids: list[str | None] = []
    for line in body.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
            ids.append(str(value["order_id"]) if isinstance(value, dict) and "order_id" in value else None)
        except ValueError:
            ids.append(None)
    return ids


def audit_archive(hop: Hop, stores: Stores) -> KeyAudit:
    began = time.monotonic()
    job, topic = hop.job.name, hop.input.name
    bucket = hop.output.namespace.removeprefix("s3://")
    prefix = hop.output.name.strip("/") + "/"
    group = f"connect-{job}"
    endpoint = str(getattr(stores.s3.meta, "endpoint_url", "the object store"))
    ranges = stores.kafka.offsets(topic)
    committed = stores.kafka.committed(topic, group, sorted(ranges))
    spans = spans_of(stores.deep_range, committed, {p: lo for p, (lo, _) in ranges.items()})
    result = KeyAudit(job, topic, spans)

    # the objects: those starting in the span, and back far enough to find the one holding its first record
    objects: dict[int, dict[str, int]] = {}
    for p, (a, b) in spans.items():
        folder = f"{prefix}partition={p}/{topic}+{p}+"
        back, found = _LOOKBACK, {}
        while True:
            lo = max(a - back, 0)
            found = _list_starts(stores, bucket, folder, lo, b, endpoint)
            starts = {}
            for key in found:
                place = place_of(key, prefix, topic, ranges)
                if place.partition == p:
                    starts[key] = place.start
            if any(s <= a for s in starts.values()) or lo == 0:
                break
            back *= 10
        objects[p] = starts

    # the records from the first object's start, and the dead letters since the oldest of them
    read_from = {p: (min([a, *objects[p].values()]), b) for p, (a, b) in spans.items()}
    records = read_range(stores, topic, read_from)
    # Connect's sink consumer reads uncommitted: where offsets skip (transaction markers, aborted records), read
    # what it read too, so that lines are placed on the records it wrote them for
    aborted: dict[int, set[int]] = {p: set() for p in spans}
    gapped = {p: read_from[p] for p, rows in records.items() if _skips(rows, *read_from[p])}
    if gapped:
        for p, rows in read_range(stores, topic, gapped, committed_only=False).items():
            kept = {r.offset for r in records[p]}
            aborted[p] = {r.offset for r in rows if r.offset not in kept}
            records[p] = rows
    dead = (
        read_dead_letters(stores, hop.dead_letters.name, _connect_source(topic), _oldest_ms(records))
        if hop.dead_letters is not None
        else {}
    )
    keys = [k for p in sorted(objects) for k in sorted(objects[p], key=objects[p].get)]
    with ThreadPoolExecutor(_THREADS) as pool:
        lines = dict(zip(keys, pool.map(lambda k: _object_ids(stores, bucket, k, endpoint), keys), strict=True))
    result.objects = [k for k in keys if lines[k] is not None]

    missing: list[str] = []
    doubled: list[str] = []
    mismatched: list[str] = []
    named: set[str] = set()
    missing_runs: list[str] = []
    doubled_runs: list[str] = []
    mismatched_by_key: dict[str, list[str]] = {}
    aborted_lines = 0
    for p, (a, b) in sorted(spans.items()):
        eligible: dict[int, str | None] = {}
        for r in records.get(p, []):
            in_span = a <= r.offset < b and r.offset not in aborted[p]
            if (p, r.offset) in dead:
                result.dead_lettered += in_span
            elif r.tombstone:
                result.tombstones += in_span
            else:
                eligible[r.offset] = r.order_id
                result.undecoded += in_span and r.order_id is None
            result.records += in_span
        held = {k: (s, lines[k]) for k, s in objects[p].items() if lines[k] is not None}
        findings = compare_archive((a, b), eligible, held, aborted[p])  # type: ignore[arg-type]
        aborted_lines += findings.aborted
        missing += [f"{topic}[{p}]@{o}" for o in findings.missing]
        missing_runs += [f"{topic}[{p}]@{x}" + (f"..{y}" if y > x else "") for x, y in offset_spans(findings.missing)]
        for o, ks in sorted(findings.doubled.items()):
            doubled.append(f"{topic}[{p}]@{o} in {' and '.join(ks)}")
            named.update(ks)
        doubled_runs += [
            f"{topic}[{p}]@{x}" + (f"..{y}" if y > x else "") + f" in {' and '.join(ks)}"
            for x, y, ks in key_runs(findings.doubled)
        ]
        for o, k, n, line_id, kafka_id in findings.mismatched:
            mismatched.append(f"{topic}[{p}]@{o} in {k} line {n}: {line_id}, the record's {kafka_id}")
            mismatched_by_key.setdefault(k, []).append(
                f"line {n} on {topic}[{p}]@{o}: {line_id}, the record's {kafka_id}"
            )
            named.add(k)

    result.missing, result.doubled, result.mismatched = missing, doubled, mismatched
    result.objects_named = sorted(named)
    result.seconds = round(time.monotonic() - began, 2)
    result.notes = [
        _audited(hop, topic, spans, stores, group, result) + f", {result.tombstones} tombstones; "
        f"{len(result.objects)} objects read"
        + (f" ({result.objects[0]} .. {result.objects[-1]})" if result.objects else "")
        + f": {len(missing)} offsets missing"
        + _examples(missing_runs, len(missing_runs))
        + f", {len(doubled)} doubled"
        + _examples(doubled_runs, len(doubled_runs))
        + f", {len(mismatched)} lines mismatched"
        + _examples(
            (f"{len(v)} in {k}, first {v[0]}" for k, v in sorted(mismatched_by_key.items())), len(mismatched_by_key)
        )
        + (f"; objects named: {', '.join(result.objects_named[:EXAMPLES])}" if result.objects_named else "")
        + (f"; {result.undecoded} records not decodable (their lines not compared)" if result.undecoded else "")
        + (
            f"; {sum(map(len, aborted.values()))} records of aborted transactions read as the sink reads them "
            f"(uncommitted), {aborted_lines} archived"
            if any(aborted.values())
            else ""
        )
        + "; copies under keys off the sink's layout are not seen here (the balance names them)"
        + f" ({result.seconds:.1f} s)"
    ]
    return result


# ---------------------------------------------------------------------------------------------------------------
# Entry points

AUDITS = {ICEBERG_JOB: audit_iceberg, ARCHIVE_JOB: audit_archive}


def run(job: str, hop: Hop, stores: Stores) -> KeyAudit | None:
    """The structured audit of ``job``'s hop over ``stores.deep_range``, or None for a hop this module does not
    audit."""
    found = AUDITS.get(job)
    return found(hop, stores) if found else None


def audit(job: str, hop: Hop, stores: Stores) -> list[str]:
    """Notes for the hop's balance (``reconcile --deep``); [] for jobs this module does not audit."""
    found = run(job, hop, stores)
    return list(found.notes) if found else []
