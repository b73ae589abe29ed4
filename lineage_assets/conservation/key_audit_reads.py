"""What the per-key audit reads: a range of ``orders`` record by record (committed, or as Connect's sink reads it),
the dead letters' sources, order_ids counted in Iceberg between their bounds, and the archive's objects and lines
around the range."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from botocore.exceptions import BotoCoreError, ClientError

from lineage_assets.conservation.archive_listing import s3_unavailable
from lineage_assets.conservation.avro_values import AvroValues
from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.kafka_reads import tail_starts
from lineage_assets.conservation.key_audit_compare import decimal_prefixes
from lineage_assets.conservation.stores import Stores

THREADS = 8


@dataclass(frozen=True)
class RangeRecord:
    offset: int
    order_id: str | None
    tombstone: bool
    timestamp_ms: int


def read_range(
    stores: Stores, topic: str, spans: Mapping[int, tuple[int, int]], committed_only: bool = True
) -> dict[int, list[RangeRecord]]:
    """partition -> the committed records of the span (all records, aborted ones too, when not ``committed_only``),
    their order_id decoded (None: not Confluent Avro)."""
    avro = AvroValues(stores.resources.kafka.registry())
    consumer = stores.kafka.consumer(committed_only)
    found: dict[int, list[RangeRecord]] = {p: [] for p in sorted(spans)}
    try:
        for msg in stores.kafka.records(consumer, topic, dict(spans)):
            value = msg.value()
            record = avro.decode(value) if value is not None else None
            order_id = record.get("order_id") if record else None
            found[msg.partition()].append(
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
    consumer = stores.kafka.consumer()
    found: dict[tuple[int, int], str] = {}
    try:
        starts = tail_starts(stores, consumer, dlq, ranges, max(since_ms, 0))
        for msg in stores.kafka.records(consumer, dlq, {p: (starts[p], end) for p, (_, end) in ranges.items()}):
            source = source_of(msg)
            if source is not None:
                found.setdefault(source, f"{dlq}[{msg.partition()}]@{msg.offset()}")
    finally:
        consumer.close()
    return found


def skips(rows: list[RangeRecord], start: int, stop: int) -> bool:
    """Whether the committed records of [start, stop) leave offsets out (markers or aborted records between them)."""
    return len(rows) != stop - start


def oldest_ms(records: Mapping[int, list[RangeRecord]]) -> int:
    return min((r.timestamp_ms for rows in records.values() for r in rows if r.timestamp_ms > 0), default=0)


def count_ids(table, ids: set[str], snapshot_id: int | None = None) -> tuple[Counter[str], int]:
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


def scanned(stores: Stores, table_name: str, scan):
    """``scan()``, a failure of the catalog or the object store raised as the store not answering."""
    try:
        return scan()
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise stores.catalog_unavailable(f"scanning {table_name} (deep audit)", exc) from exc


def list_starts(stores: Stores, bucket: str, folder: str, lo: int, hi: int, endpoint: str) -> dict[str, str]:
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


def object_ids(stores: Stores, bucket: str, key: str, endpoint: str) -> list[str | None] | None:
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
