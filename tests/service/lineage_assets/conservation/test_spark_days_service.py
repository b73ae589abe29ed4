"""The Spark hop on the real stack: today's supplier_stats materialized through Dagster with Spark, its balance
judged against pyiceberg scans made here, a row deleted by another writer reported as missing with that writer
named, and the Spark run's statistics read back from Marquez."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import requests
from pyiceberg.expressions import And, EqualTo

from infra.services.iceberg_catalog import load_catalog
from lineage_assets.conservation import spark_days
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.stores import Stores, count_store_path
from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB, Pipeline
from lineage_assets.spark.supplier_stats_batch import build_supplier_stats_asset
from tests.service.lineage_assets.conftest import commit_retrying, deliver, outbox_events
from tests.support.new_orders_pause import new_orders_sensor_paused

pytestmark = pytest.mark.service

NODE = "iceberg__default__supplier_stats"


@pytest.fixture(scope="module", autouse=True)
def daemon_leaves_today_alone(settings):
    """The stack's sensor would re-materialize today (and undo the injected fault) while this module judges it."""
    with new_orders_sensor_paused(settings):
        yield


@pytest.fixture(scope="module")
def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


@pytest.fixture(scope="module")
def materialized(settings, resources, today):
    """Today's supplier_stats written by the Spark job through Dagster; its run's materialization."""
    asset = build_supplier_stats_asset(Pipeline.from_settings(settings))
    result = dg.materialize([asset], partition_key=today, resources=resources, raise_on_error=False)
    assert result.success
    return result


@pytest.fixture
def stores(settings, pipeline, resources, tmp_path):
    with dg.build_resources({"iceberg": resources["iceberg"]}) as res:
        s = Stores(pipeline, res, count_store_path(settings))
        s.counts = CountStore(tmp_path / "c.sqlite")
        yield s


def the_balance(stores, pipeline):
    return spark_days.balance(hops(pipeline)[SPARK_SUPPLIER_STATS_JOB], stores)


def orders_of_day(settings, snapshot_id: int, day: str) -> int:
    """Independent: today's rows of Iceberg orders at a snapshot, counted by scanning them."""
    table = load_catalog(settings).load_table("default.orders")
    end = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
    scan = table.scan(
        row_filter=f"bid_time >= '{day}T00:00:00' and bid_time < '{end}T00:00:00'",
        snapshot_id=snapshot_id,
        selected_fields=("order_id",),
    )
    return scan.to_arrow().num_rows


def summarised(settings, snapshot_id: int, day: str) -> int:
    """Independent: sum(total_count) of the day in supplier_stats at a snapshot."""
    table = load_catalog(settings).load_table("default.supplier_stats")
    rows = table.scan(row_filter=f"bid_date = '{day}'", snapshot_id=snapshot_id).to_arrow()
    return int(pc.sum(rows["total_count"]).as_py() or 0)


def written_snapshot(materialized) -> int:
    return int(materialized.asset_materializations_for_node(NODE)[0].metadata["iceberg/snapshot_id"].value)


def test_the_commit_carries_what_the_spark_job_read(settings, materialized, today):
    table = load_catalog(settings).load_table("default.supplier_stats")
    summary = table.snapshot_by_id(written_snapshot(materialized)).summary.additional_properties
    read = int(summary["lineage-lab.input-snapshot-id"])
    assert summary["lineage-lab.day"] == today
    assert int(summary["lineage-lab.input-rows"]) == orders_of_day(settings, read, today)
    summed = summarised(settings, written_snapshot(materialized), today)
    assert int(summary["lineage-lab.rejected-orders"]) == orders_of_day(settings, read, today) - summed
    rows = table.scan(row_filter=f"bid_date = '{today}'", snapshot_id=written_snapshot(materialized)).to_arrow()
    assert int(summary["lineage-lab.output-rows"]) == rows.num_rows


def test_today_balances_against_independent_scans(settings, pipeline, materialized, stores, today):
    b = the_balance(stores, pipeline)
    day = b.range["days"][today]
    assert "unknown" not in day, day
    read, now = day["orders snapshot"], b.range["orders snapshot now"]
    stats_now = b.range["supplier_stats snapshot now"]
    assert day["orders read"] == orders_of_day(settings, read, today)
    assert day["in"] == orders_of_day(settings, now, today)
    assert day["pending"] == orders_of_day(settings, now, today) - orders_of_day(settings, read, today)
    assert day["out"] == summarised(settings, stats_now, today)
    assert day["dead_letters"] == orders_of_day(settings, read, today) - summarised(
        settings, day["supplier_stats snapshot"], today
    )
    assert (day["missing"], day["duplicates"]) == (0, 0)
    # a second look at the unchanged day (the new-orders sensor is paused for this module: nothing writes today's
    # supplier_stats in between) gives the same figures
    again = the_balance(stores, pipeline).range["days"][today]
    assert again["supplier_stats snapshot"] == day["supplier_stats snapshot"]
    assert (again["out"], again["orders read"]) == (day["out"], day["orders read"])


def test_a_row_deleted_by_another_writer_is_missing_and_named(settings, pipeline, materialized, stores, today):
    table = load_catalog(settings).load_table("default.supplier_stats")
    rows = table.scan(row_filter=f"bid_date = '{today}'").to_arrow()
    victim = rows.slice(0, 1)
    supplier, hour = victim["supplier"][0].as_py(), victim["bid_hour"][0].as_py()
    count = victim["total_count"][0].as_py()
    where = And(EqualTo("bid_date", today), And(EqualTo("supplier", supplier), EqualTo("bid_hour", hour)))
    commit_retrying(table, lambda t: t.delete(where))
    try:
        table.refresh()
        deleter = table.current_snapshot().snapshot_id
        assert table.scan(row_filter=where).to_arrow().num_rows == 0
        b = the_balance(stores, pipeline)
        day = b.range["days"][today]
        assert day["missing"] == count, day
        assert b.status == "missing" and b.missing == count
        named = [w for w in b.other_writers if str(deleter) in w.what]
        assert len(named) == 1 and named[0].rows == -count, b.other_writers
        assert today in named[0].what
    finally:
        commit_retrying(table, lambda t: t.append(victim))
    b = the_balance(stores, pipeline)
    assert b.range["days"][today]["missing"] == 0 and b.status in ("balanced", "pending"), b.summary()
    assert b.range["days"][today]["out"] == summarised(settings, b.range["supplier_stats snapshot now"], today)


def test_the_spark_run_in_marquez_carries_the_statistics(settings, resources, materialized, today):
    deliver(resources["lineage"])
    # the module's private outbox holds the events of its one materialization: the write action's COMPLETE
    (write,) = [
        e
        for e in outbox_events(resources["lineage"])
        if e["eventType"] == "COMPLETE" and e["job"]["name"].startswith(SPARK_SUPPLIER_STATS_JOB + ".overwrite")
    ]
    stored = requests.get(f"{settings.marquez_url}/api/v1/jobs/runs/{write['run']['runId']}", timeout=10).json()
    (orders,) = [v for v in stored["inputDatasetVersions"] if v["datasetVersionId"]["name"] == "default/orders"]
    (stats,) = [v for v in stored["outputDatasetVersions"] if v["datasetVersionId"]["name"] == "default/supplier_stats"]
    snapshot = written_snapshot(materialized)
    table = load_catalog(settings).load_table("default.supplier_stats")
    summary = table.snapshot_by_id(snapshot).summary.additional_properties
    read = int(summary["lineage-lab.input-snapshot-id"])
    assert orders["facets"]["inputStatistics"]["rowCount"] == orders_of_day(settings, read, today)
    written = table.scan(row_filter=f"bid_date = '{today}'", snapshot_id=snapshot).to_arrow().num_rows
    assert stats["facets"]["outputStatistics"]["rowCount"] == written
    added = sum(
        task.file.file_size_in_bytes
        for task in table.scan(row_filter=f"bid_date = '{today}'", snapshot_id=snapshot).plan_files()
    )
    assert stats["facets"]["outputStatistics"]["size"] == added


def test_a_total_changed_with_its_count_unchanged_is_named_then_clears_when_put_back(
    settings, pipeline, materialized, stores, today
):
    """total_price sums price: one row of today's supplier_stats overwritten by another writer with its total a
    cent dearer and its count unchanged keeps every count, fails the values naming the day (the writer claims the
    cent), and clears once the row is put back as it was."""
    before = the_balance(stores, pipeline)
    (weighed,) = before.values
    assert weighed.difference == 0, before.summary()  # every day weighed, and none differs
    table = load_catalog(settings).load_table("default.supplier_stats")
    victim = table.scan(row_filter=f"bid_date = '{today}'").to_arrow().slice(0, 1)
    (record,) = victim.to_pylist()
    record["total_price"] += Decimal("0.01")
    supplier, hour = record["supplier"], record["bid_hour"]
    where = And(EqualTo("bid_date", today), And(EqualTo("supplier", supplier), EqualTo("bid_hour", hour)))
    commit_retrying(table, lambda t: t.overwrite(pa.Table.from_pylist([record], schema=victim.schema), where))
    try:
        b = the_balance(stores, pipeline)
        assert b.status == "values_differ" and b.difference == 0, b.summary()
        (found,) = b.values
        assert found.difference == -1 and len(found.where) == 1 and f"day {today}:" in found.where[0], found.summary()
        earlier = {w.reference for w in before.other_writers}
        new = [w for w in b.other_writers if w.reference not in earlier]  # pyiceberg's overwrite: a delete, an append
        assert new and all(today in w.what for w in new), b.other_writers
        assert sum(u for w in new for c, u in w.claimed if c == "total_price") == 1, new  # they claim the cent
    finally:
        commit_retrying(table, lambda t: t.overwrite(victim, where))
    after = the_balance(stores, pipeline)
    assert after.status in ("balanced", "pending") and after.values[0].difference == 0, after.summary()
