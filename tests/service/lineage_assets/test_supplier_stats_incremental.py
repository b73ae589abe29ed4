"""supplier_stats incremental for real: a day written whole, then more orders appended in two snapshots and the
day run incrementally (only those read, merged into the day's rows), then an order of the day deleted, which makes
the next incremental request recompute the whole day. After every run the day's rows equal this test's own
aggregation of the orders, and the commit's properties equal this test's own count of what was read."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan

from infra.services.iceberg_catalog import load_catalog
from lineage_assets.conservation import spark_days
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.stores import Stores, count_store_path
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB
from tests.service.lineage_assets.conftest import commit_retrying
from tests.support.new_orders_pause import new_orders_sensor_paused
from tests.support.supplier_stats_days import (
    actual_stats,
    expected_stats,
    known_orders,
    materialize,
    write_orders,
)


@pytest.fixture(scope="module", autouse=True)
def daemon_leaves_this_day_alone(settings):
    with new_orders_sensor_paused(settings):
        yield


@pytest.fixture(scope="module")
def lineage(resources):
    return resources["lineage"]


@pytest.fixture(scope="module")
def day() -> dt.date:
    # 2025: the other supplier_stats modules write days of 2024
    return dt.date(2025, 1, 1) + dt.timedelta(days=random.randrange(0, 360))


@pytest.fixture(scope="module")
def orders_table(settings, pipeline, day):
    target = pipeline.dataset("iceberg_orders")
    table, _ = ensure_orders_table(load_catalog(settings), target.symlinks[0].name, target)
    start = dt.datetime.combine(day, dt.time())
    window = And(
        GreaterThanOrEqual("bid_time", start.isoformat()),
        LessThan("bid_time", (start + dt.timedelta(days=2)).isoformat()),
    )
    commit_retrying(table, lambda t: t.delete(window))
    return table


def commit_of(settings, result) -> dict[str, str]:
    """The summary of the supplier_stats snapshot the run's materialization names."""
    meta = result.asset_materializations_for_node("iceberg__default__supplier_stats")[0].metadata
    table = load_catalog(settings).load_table("default.supplier_stats")
    snapshot = table.snapshot_by_id(int(meta["iceberg/snapshot_id"].value))
    return {k.removeprefix("lineage-lab."): v for k, v in snapshot.summary.additional_properties.items()}


def day_rows_at(table, day: dt.date, snapshot_id: int) -> int:
    """The test's own count of the day's orders in Iceberg at a snapshot."""
    start = dt.datetime.combine(day, dt.time())
    window = And(
        GreaterThanOrEqual("bid_time", start.isoformat()),
        LessThan("bid_time", (start + dt.timedelta(days=1)).isoformat()),
    )
    scan = table.refresh().scan(row_filter=window, snapshot_id=snapshot_id, selected_fields=("order_id",))
    return scan.to_arrow().num_rows


@pytest.fixture
def stores(settings, pipeline, resources, tmp_path):
    """The Spark hop's reader with a count store of its own (the stack's is left alone)."""
    with dg.build_resources({"iceberg": resources["iceberg"]}) as res:
        built = Stores(pipeline, res, count_store_path(settings))
        built.counts = CountStore(tmp_path / "counts.sqlite")
        yield built


def test_appends_are_merged_and_a_delete_recomputes_the_day(settings, pipeline, orders_table, day, lineage, stores):
    other = day + dt.timedelta(days=1)
    first = [r for r in known_orders([day, other], n=120, seed=21) if r["bid_time"].date() == day]
    write_orders(orders_table, first)
    whole = materialize(settings, day, lineage, {"mode": "full"})
    assert whole.success
    assert actual_stats(settings, day) == expected_stats(first, day)
    base = commit_of(settings, whole)
    assert base["mode"] == "full"

    second = known_orders([day, day], n=40, seed=22)
    third = known_orders([day, other], n=30, seed=23)
    third.append({**third[0], "order_id": "inc-neg", "price": Decimal("-1.00")})
    third.append({**third[0], "order_id": "inc-null", "price": None})
    write_orders(orders_table, second)
    write_orders(orders_table, third)
    new_on_day = [r for r in second + third if r["bid_time"].date() == day]

    added = materialize(settings, day, lineage, {"mode": "incremental"})
    assert added.success
    everything = first + second + third
    assert actual_stats(settings, day) == expected_stats(everything, day)
    commit = commit_of(settings, added)
    assert commit["mode"] == "incremental", commit["mode-reason"]
    assert commit["start-snapshot-id"] == base["input-snapshot-id"]
    assert int(commit["read-rows"]) == len(new_on_day)
    assert int(commit["read-rejected"]) == 2, "the negative and the NULL price"
    read_to = int(commit["input-snapshot-id"])
    assert int(commit["input-rows"]) == day_rows_at(orders_table, day, read_to)
    assert int(commit["rejected-orders"]) == 2
    stats = load_catalog(settings).load_table("default.supplier_stats")
    summed = stats.scan(row_filter=f"bid_date = '{day.isoformat()}'", selected_fields=("total_count",)).to_arrow()
    assert (
        int(commit["output-orders"])
        == pc.sum(summed["total_count"]).as_py()
        == len([r for r in everything if r["bid_time"].date() == day]) - 2
    )
    meta = added.asset_materializations_for_node("iceberg__default__supplier_stats")[0].metadata
    assert meta["input_orders"].value == len(new_on_day)
    assert meta["supplier_stats/mode"].value == "incremental"

    # the conservation hop's own reading of what each write read: the full write, then the incremental one
    figures = spark_days.balance(hops(pipeline)[SPARK_SUPPLIER_STATS_JOB], stores).range["days"][day.isoformat()]
    assert [(r["mode"], r["orders read"], r["rejected"]) for r in figures["reads"]] == [
        ("full", len(first), 0),
        ("incremental", len(new_on_day), 2),
    ]
    assert (figures["missing"], figures["duplicates"], figures["dead_letters"]) == (0, 0, 2)

    again = materialize(settings, day, lineage, {"mode": "incremental"})
    assert again.success
    meta = again.asset_materializations_for_node("iceberg__default__supplier_stats")[0].metadata
    assert meta["input_orders"].value == 0, "nothing was appended to the day since"
    assert actual_stats(settings, day) == expected_stats(everything, day)

    gone = first[0]["order_id"]
    commit_retrying(orders_table, lambda t: t.delete(EqualTo("order_id", gone)))
    fourth = known_orders([day, day], n=10, seed=24)
    write_orders(orders_table, fourth)
    recomputed = materialize(settings, day, lineage, {"mode": "incremental"})
    assert recomputed.success
    commit = commit_of(settings, recomputed)
    assert commit["mode"] == "full"
    assert "(delete)" in commit["mode-reason"] or "(overwrite)" in commit["mode-reason"], commit["mode-reason"]
    left = [r for r in everything + fourth if r["order_id"] != gone]
    assert actual_stats(settings, day) == expected_stats(left, day)


def test_an_unknown_mode_is_refused_with_what_to_use(settings, day, lineage):
    result = materialize(settings, day, lineage, {"mode": "fast"})
    assert not result.success
    failure = result.get_step_failure_events()[0].event_specific_data.error.message
    assert "mode 'fast' is not one of full, incremental" in failure


def test_a_run_that_loses_the_race_for_its_day_plans_again_on_top_of_the_winner(settings, orders_table, day, lineage):
    """Another writer changes the day's rows between the run's plan and its commit: the commit is refused (it is
    validated from the snapshot the run planned on) and the run plans again (the whole day now: the other write was
    not this job's) and commits once. The plan itself is the product's; the test only writes in between."""
    from lineage_assets.spark import day_write

    race_day = day + dt.timedelta(days=3)
    start = dt.datetime.combine(race_day, dt.time())
    window = And(
        GreaterThanOrEqual("bid_time", start.isoformat()),
        LessThan("bid_time", (start + dt.timedelta(days=1)).isoformat()),
    )
    commit_retrying(orders_table, lambda t: t.delete(window))
    orders = known_orders([race_day, race_day], n=20, seed=31)
    write_orders(orders_table, orders)
    assert materialize(settings, race_day, lineage, {"mode": "full"}).success
    more = known_orders([race_day, race_day], n=8, seed=32)
    write_orders(orders_table, more)
    stats = load_catalog(settings).load_table("default.supplier_stats")
    intruder = pa.Table.from_pylist(
        [
            {
                "supplier": "Intruder",
                "bid_date": race_day,
                "bid_hour": 0,
                "total_price": Decimal("1.00"),
                "total_count": 1,
            }
        ],
        schema=stats.schema().as_arrow(),
    )
    real_plan, raced = day_write.plan, []

    def plan_then_another_writer(*args, **kwargs):
        planned = real_plan(*args, **kwargs)
        if not raced:  # the first plan only
            raced.append(True)
            commit_retrying(stats.refresh(), lambda t: t.append(intruder))
        return planned

    day_write.plan = plan_then_another_writer
    try:
        result = materialize(settings, race_day, lineage, {"mode": "incremental"})
    finally:
        day_write.plan = real_plan
    assert result.success and raced
    commit = commit_of(settings, result)
    assert commit["mode"] == "full", commit["mode-reason"]
    assert "not written by this job" in commit["mode-reason"]
    assert actual_stats(settings, race_day) == expected_stats(orders + more, race_day), "the intruder's row is gone"
