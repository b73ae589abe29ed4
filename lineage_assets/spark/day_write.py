"""One supplier_stats day written by Spark: pin the orders snapshot to read up to, plan the read (the whole day, or
only what was appended since the day's last write), read, aggregate, merge, and commit the day in one overwrite
that is validated against every change of the day since the plan. What the run read goes into the commit itself
(``day_commit``). Table facts are read with pyiceberg: a Spark read would be one more input in the lineage."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from infra.services.iceberg_catalog import CATALOG_NAME
from lineage_assets.spark.day_commit import PROPERTY_PREFIX, RunRead, commit_properties
from lineage_assets.spark.day_frames import (
    CREATE_TARGET,
    STATS_DDL,
    ReadCounts,
    aggregate,
    day_increment,
    day_orders,
    merge,
    read_counts,
)
from lineage_assets.spark.increment import INCREMENTAL, plan


def short(table: str) -> str:
    """The catalog's name of a table (``default.orders``) from Spark's (``lakehouse.default.orders``)."""
    return table.removeprefix(CATALOG_NAME + ".")


def day_files(orders_table, day: str, snapshot_id: int | None) -> dict[str, int] | None:
    """The day's data files at a snapshot -> their bytes, planned from the manifests (pruned by partition), not
    read; None when the table is not an orders table (Spark's own analysis then says what is wrong)."""
    if snapshot_id is None:
        return {}
    end = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
    try:
        tasks = orders_table.scan(
            row_filter=f"bid_time >= '{day}T00:00:00' and bid_time < '{end}T00:00:00'", snapshot_id=snapshot_id
        ).plan_files()
    except ValueError:
        return None
    return {t.file.file_path: t.file.file_size_in_bytes for t in tasks}


def summary_of(snapshot) -> dict[str, str]:
    """A snapshot's summary properties (engine's and ours), without the operation."""
    return dict(snapshot.summary.additional_properties) if snapshot is not None and snapshot.summary else {}


def written_snapshot(target_table, app_id: str, day: str):
    """This application's commit of ``day`` (the newest snapshot carrying both), not whatever is current now."""
    for snapshot in sorted(target_table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True):
        summary = summary_of(snapshot)
        if summary.get("spark.app.id") == app_id and summary.get(PROPERTY_PREFIX + "day") == day:
            return snapshot
    return None


@dataclass(frozen=True)
class DayWritten:
    """What a run of one day did: what it read, the day's cumulative figures its commit states, the bytes of the
    orders files it read, and its commit (None when there was nothing new to add, so nothing was committed)."""

    read: RunRead
    input_snapshot: int | None
    day_orders: int
    day_rejected: int
    day_rows: int | None  # None: nothing committed, the rows of the base stand
    input_bytes: int | None
    written: object | None


STATS_COLUMNS = ("supplier", "bid_date", "bid_hour", "total_price", "total_count")


def base_frame(session, stats_table, day: str, snapshot_id: int):
    """The day's supplier_stats rows at ``snapshot_id`` as a local Spark frame, and their (supplier, hour) keys.
    Read with pyiceberg: a Spark read of the table would make supplier_stats an input of its own job."""
    rows = stats_table.scan(row_filter=f"bid_date = '{day}'", snapshot_id=snapshot_id).to_arrow().to_pylist()
    frame = session.createDataFrame([tuple(r[c] for c in STATS_COLUMNS) for r in rows], STATS_DDL)
    return frame, {(r["supplier"], int(r["bid_hour"])) for r in rows}


@dataclass(frozen=True)
class DayRead:
    """A planned read: the rows to commit, what this run read, the day's cumulative figures, the files' bytes."""

    stats: object
    counts: ReadCounts
    day_orders: int
    day_rejected: int
    day_rows: int
    input_bytes: int | None
    #: the day's refused orders' prices in cents, cumulative (None: the base did not record them)
    day_rejected_cents: int | None = None


def read_increment(session, orders_table, stats_table, source_table: str, day: str, start: int, end: int, base):
    """The orders appended since ``start``, aggregated and merged into the day's rows of the base write."""
    orders = day_increment(session, source_table, day, start, end)
    counts = read_counts(orders)
    before, keys = base_frame(session, stats_table, day, base.snapshot_id)
    files_now, files_before = day_files(orders_table, day, end), day_files(orders_table, day, start)
    new_bytes = None
    if files_now is not None and files_before is not None:
        new_bytes = sum(size for path, size in files_now.items() if path not in files_before)
    return DayRead(
        merge(before, aggregate(orders)),
        counts,
        base.input_rows + counts.rows,
        base.rejected + counts.rejected,
        len(keys | counts.groups),
        new_bytes,
        None if base.rejected_cents is None else base.rejected_cents + counts.rejected_cents,
    )


def read_whole_day(session, orders_table, source_table: str, day: str, end: int | None) -> DayRead:
    """Every order of the day at ``end``, aggregated."""
    orders = day_orders(session, source_table, day, end)
    counts = read_counts(orders)
    files = day_files(orders_table, day, end)
    return DayRead(
        aggregate(orders),
        counts,
        counts.rows,
        counts.rejected,
        len(counts.groups),
        sum(files.values()) if files is not None else None,
        counts.rejected_cents,
    )


#: Iceberg's refusals of a commit that raced another writer of the same day (Java exception names in the error)
COMMIT_CONFLICTS = ("org.apache.iceberg.exceptions.ValidationException", "org.apache.iceberg.exceptions.CommitFailed")
#: plans and commits of one run before a day that keeps changing under it fails the run
ATTEMPTS = 3


def write_day(
    session, catalog, source_table: str, target_table: str, day: str, wanted: str, attempts: int = ATTEMPTS
) -> DayWritten:
    """Plan, read, aggregate and commit ``day`` (``wanted``: full or incremental; incremental is a request the
    plan may turn into full, and its reason says why). A commit refused because another writer changed the day
    since the plan (another run, a hand edit) is planned and made again on top of that change, in the same Spark
    application, up to ``attempts`` times."""
    for attempt in range(1, attempts + 1):
        try:
            return _write_once(session, catalog, source_table, target_table, day, wanted)
        except Exception as exc:
            if attempt == attempts or not any(name in str(exc) for name in COMMIT_CONFLICTS):
                raise
    raise AssertionError("unreachable")


def _write_once(session, catalog, source_table: str, target_table: str, day: str, wanted: str) -> DayWritten:
    from pyspark.sql import functions as F

    session.sql(CREATE_TARGET.format(table=target_table))
    orders_table = catalog.load_table(short(source_table))
    stats_table = catalog.load_table(short(target_table))
    current = orders_table.current_snapshot()
    end = current.snapshot_id if current is not None else None
    chosen = plan(orders_table, stats_table, day, end, wanted)
    decision, base = chosen.decision, chosen.base
    if decision.mode == INCREMENTAL and base is not None and decision.start == end:
        # nothing appended since the day's last write: its rows stand, and nothing is read or committed
        nothing = RunRead(decision.mode, decision.reason, decision.start, base.snapshot_id, 0, 0)
        return DayWritten(nothing, end, base.input_rows, base.rejected, None, 0, None)
    # Spark's catalog cached the table when it was first loaded: a snapshot Flink committed since then (the one
    # just pinned) is unknown to that copy ("Cannot find snapshot with ID ...")
    session.catalog.refreshTable(source_table)
    if decision.mode == INCREMENTAL and base is not None and decision.start is not None and end is not None:
        done = read_increment(session, orders_table, stats_table, source_table, day, decision.start, end, base)
        read = RunRead(decision.mode, decision.reason, decision.start, base.snapshot_id, *_read(done))
    else:
        done = read_whole_day(session, orders_table, source_table, day, end)
        read = RunRead(decision.mode, decision.reason, None, None, *_read(done))
    properties = commit_properties(
        day,
        end,
        done.day_orders,
        done.day_rejected,
        done.day_rows,
        done.day_orders - done.day_rejected,
        read,
        done.day_rejected_cents,
    )
    writer = done.stats.writeTo(target_table)
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    if chosen.validate_from is not None:
        # a write of this day committed since the plan (another run, a hand edit) fails the commit: retried anew
        writer = writer.option("isolation-level", "serializable").option(
            "validate-from-snapshot-id", str(chosen.validate_from)
        )
    writer.overwrite(F.col("bid_date") == F.lit(day).cast("date"))
    written = written_snapshot(catalog.load_table(short(target_table)), session.sparkContext.applicationId, day)
    return DayWritten(read, end, done.day_orders, done.day_rejected, done.day_rows, done.input_bytes, written)


def _read(done: DayRead) -> tuple[int, int]:
    return done.counts.rows, done.counts.rejected
