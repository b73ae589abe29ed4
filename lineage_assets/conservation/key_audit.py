"""The per-key audit (``lineage-lab reconcile --deep``) of the copies (iceberg-ingestion and orders-s3-sink).

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

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from lineage_assets.conservation.archive_keys import place_of
from lineage_assets.conservation.copy_dead_letters import connect_source, flink_source, named_in
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.key_audit_compare import (
    EXAMPLES,
    KeyAudit,
    audited,
    compare_archive,
    compare_counts,
    examples,
    key_runs,
    offset_spans,
    spans_of,
)
from lineage_assets.conservation.key_audit_reads import (
    THREADS,
    count_ids,
    list_starts,
    object_ids,
    oldest_ms,
    read_dead_letters,
    read_range,
    scanned,
    skips,
)
from lineage_assets.conservation.stores import Stores

#: how far before the range the archive is first searched for the object holding its first records (offsets)
_LOOKBACK = 1_000
#: doubled ids whose copies are searched for in the records after the range, at most this many offsets per partition
_AFTER_LIMIT = 200_000


def audit_iceberg(hop: Hop, stores: Stores) -> KeyAudit:
    began = time.monotonic()
    topic = hop.input.name
    table_name = hop.output.table_name
    group, _ = stores.consumer_group(hop.job.name)
    ranges = stores.kafka.offsets(topic)
    committed = stores.kafka.committed(topic, group, sorted(ranges))
    spans = spans_of(stores.deep_range, committed, {p: lo for p, (lo, _) in ranges.items()})
    result = KeyAudit(hop.job.name, topic, spans)
    records = read_range(stores, topic, spans)
    dead = (
        read_dead_letters(stores, hop.dead_letters.name, named_in(flink_source, topic), oldest_ms(records))
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
    table = stores.table(table_name)
    snapshot = table.current_snapshot()
    snapshot_id = snapshot.snapshot_id if snapshot else None
    found, rows_read = scanned(stores, table_name, lambda: count_ids(table, set(expected), snapshot_id))
    missing, doubled = compare_counts(expected, found)
    late = 0
    if missing:  # committed offsets can come before the snapshot of their checkpoint: look again at the newest
        table = stores.table(table_name)
        newest = table.current_snapshot()
        if newest is not None and newest.snapshot_id != snapshot_id:
            again, _ = scanned(stores, table_name, lambda: count_ids(table, set(missing), newest.snapshot_id))
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
        audited(hop, topic, spans, stores, group, result)
        + f", {result.undecoded} neither decodable nor dead-lettered (not judged); {len(expected)} order_ids "
        f"({sum(expected.values())} expected rows) looked up in {table_name} at snapshot {snapshot_id} "
        f"({rows_read} rows read between the ids' bounds): {len(missing)} missing"
        + examples((f"{k}" + (f" x{n}" if n > 1 else "") for k, n in sorted(missing.items())), len(missing))
        + f", {len(doubled)} doubled"
        + examples((f"{k} +{n}" for k, n in sorted(doubled.items())), len(doubled))
        + (f"; {late} found only in the newer snapshot (late, not missing)" if late else "")
        + (f"; {copies_after} copies explained by re-sends after the range" if copies_after else "")
        + ("; a doubled id may also be a re-send before the range (audit a wider range to tell)" if doubled else "")
        + f" ({result.seconds:.1f} s)"
    ]
    return result


def objects_around(
    stores: Stores, bucket: str, prefix: str, topic: str, spans, ranges, endpoint: str
) -> dict[int, dict[str, int]]:
    """partition -> key -> start offset of the objects starting in the span, and back far enough to find the one
    holding its first record."""
    objects: dict[int, dict[str, int]] = {}
    for p, (a, b) in spans.items():
        folder = f"{prefix}partition={p}/{topic}+{p}+"
        back = _LOOKBACK
        while True:
            lo = max(a - back, 0)
            found = list_starts(stores, bucket, folder, lo, b, endpoint)
            starts = {}
            for key in found:
                place = place_of(key, prefix, topic, ranges)
                if place.partition == p:
                    starts[key] = place.start
            if any(s <= a for s in starts.values()) or lo == 0:
                break
            back *= 10
        objects[p] = starts
    return objects


def records_as_the_sink_read(stores: Stores, topic: str, spans, objects):
    """(partition -> the records from the first object's start, partition -> offsets of aborted transactions'
    records): Connect's sink consumer reads uncommitted, so where offsets skip (transaction markers, aborted
    records) what it read is read too, and lines are placed on the records it wrote them for."""
    read_from = {p: (min([a, *objects[p].values()]), b) for p, (a, b) in spans.items()}
    records = read_range(stores, topic, read_from)
    aborted: dict[int, set[int]] = {p: set() for p in spans}
    gapped = {p: read_from[p] for p, rows in records.items() if skips(rows, *read_from[p])}
    if gapped:
        for p, rows in read_range(stores, topic, gapped, committed_only=False).items():
            kept = {r.offset for r in records[p]}
            aborted[p] = {r.offset for r in rows if r.offset not in kept}
            records[p] = rows
    return records, aborted


@dataclass
class ArchiveComparison:
    """The archive's lines against the range's records, every partition: what is named and how it is shown."""

    missing: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    named: set[str] = field(default_factory=set)
    missing_runs: list[str] = field(default_factory=list)
    doubled_runs: list[str] = field(default_factory=list)
    mismatched_by_key: dict[str, list[str]] = field(default_factory=dict)
    aborted_lines: int = 0


def compare_partitions(
    topic: str, spans, records, aborted, dead, objects, lines, result: KeyAudit
) -> ArchiveComparison:
    """Each partition's records (dead letters and tombstones apart) against the lines of the objects holding them;
    ``result``'s record counts are filled in on the way."""
    found = ArchiveComparison()
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
        found.aborted_lines += findings.aborted
        found.missing += [f"{topic}[{p}]@{o}" for o in findings.missing]
        found.missing_runs += [
            f"{topic}[{p}]@{x}" + (f"..{y}" if y > x else "") for x, y in offset_spans(findings.missing)
        ]
        for o, ks in sorted(findings.doubled.items()):
            found.doubled.append(f"{topic}[{p}]@{o} in {' and '.join(ks)}")
            found.named.update(ks)
        found.doubled_runs += [
            f"{topic}[{p}]@{x}" + (f"..{y}" if y > x else "") + f" in {' and '.join(ks)}"
            for x, y, ks in key_runs(findings.doubled)
        ]
        for o, k, n, line_id, kafka_id in findings.mismatched:
            found.mismatched.append(f"{topic}[{p}]@{o} in {k} line {n}: {line_id}, the record's {kafka_id}")
            found.mismatched_by_key.setdefault(k, []).append(
                f"line {n} on {topic}[{p}]@{o}: {line_id}, the record's {kafka_id}"
            )
            found.named.add(k)
    return found


def audit_archive(hop: Hop, stores: Stores) -> KeyAudit:
    began = time.monotonic()
    job, topic = hop.job.name, hop.input.name
    bucket = hop.output.namespace.removeprefix("s3://")
    prefix = hop.output.name.strip("/") + "/"
    group, _ = stores.consumer_group(job)
    endpoint = str(getattr(stores.s3.meta, "endpoint_url", "the object store"))
    ranges = stores.kafka.offsets(topic)
    committed = stores.kafka.committed(topic, group, sorted(ranges))
    spans = spans_of(stores.deep_range, committed, {p: lo for p, (lo, _) in ranges.items()})
    result = KeyAudit(job, topic, spans)
    objects = objects_around(stores, bucket, prefix, topic, spans, ranges, endpoint)
    records, aborted = records_as_the_sink_read(stores, topic, spans, objects)
    dead = (
        read_dead_letters(stores, hop.dead_letters.name, named_in(connect_source, topic), oldest_ms(records))
        if hop.dead_letters is not None
        else {}
    )
    keys = [k for p in sorted(objects) for k in sorted(objects[p], key=objects[p].get)]
    with ThreadPoolExecutor(THREADS) as pool:
        lines = dict(zip(keys, pool.map(lambda k: object_ids(stores, bucket, k, endpoint), keys), strict=True))
    result.objects = [k for k in keys if lines[k] is not None]
    c = compare_partitions(topic, spans, records, aborted, dead, objects, lines, result)
    result.missing, result.doubled, result.mismatched = c.missing, c.doubled, c.mismatched
    result.objects_named = sorted(c.named)
    result.seconds = round(time.monotonic() - began, 2)
    result.notes = [
        audited(hop, topic, spans, stores, group, result) + f", {result.tombstones} tombstones; "
        f"{len(result.objects)} objects read"
        + (f" ({result.objects[0]} .. {result.objects[-1]})" if result.objects else "")
        + f": {len(c.missing)} offsets missing"
        + examples(c.missing_runs, len(c.missing_runs))
        + f", {len(c.doubled)} doubled"
        + examples(c.doubled_runs, len(c.doubled_runs))
        + f", {len(c.mismatched)} lines mismatched"
        + examples(
            (f"{len(v)} in {k}, first {v[0]}" for k, v in sorted(c.mismatched_by_key.items())),
            len(c.mismatched_by_key),
        )
        + (f"; objects named: {', '.join(result.objects_named[:EXAMPLES])}" if result.objects_named else "")
        + (f"; {result.undecoded} records not decodable (their lines not compared)" if result.undecoded else "")
        + (
            f"; {sum(map(len, aborted.values()))} records of aborted transactions read as the sink reads them "
            f"(uncommitted), {c.aborted_lines} archived"
            if any(aborted.values())
            else ""
        )
        + "; copies under keys off the sink's layout are not seen here (the balance names them)"
        + f" ({result.seconds:.1f} s)"
    ]
    return result


#: (job kind, store kind of the output) -> the audit of such a hop: the copies, whose outputs keep each record's key
AUDITS = {("copy", "iceberg_table"): audit_iceberg, ("copy", "object_prefix"): audit_archive}


def run(hop: Hop, stores: Stores) -> KeyAudit | None:
    """The structured audit of the hop over ``stores.deep_range``, or None for a kind of hop this module does not
    audit."""
    found = AUDITS.get((hop.job.kind, hop.output.store_kind))  # type: ignore[arg-type]
    return found(hop, stores) if found else None


def audit(hop: Hop, stores: Stores) -> list[str]:
    """Notes for the hop's balance (``reconcile --deep``); [] for kinds of hop this module does not audit."""
    found = run(hop, stores)
    return list(found.notes) if found else []
