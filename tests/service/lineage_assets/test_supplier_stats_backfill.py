"""A 3-day backfill of supplier_stats launched the way the UI does (GraphQL on the stack's webserver), run by the
stack's daemon: one Dagster run and one Spark application per day, each day's OpenLineage run in Marquez with the
day as its nominal time and the Dagster run as its parent, each day's rows equal to an aggregation computed here
from the Iceberg orders, stale rows of those days gone, and the days around the range untouched."""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import defaultdict
from decimal import Decimal

import dagster as dg
import pyarrow as pa
import pytest
import requests
from dagster._core.execution.backfill import BulkActionStatus  # not exported by dagster
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

from infra.services.iceberg_catalog import load_catalog
from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.lineage.identity import DAGSTER_JOB
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.metadata import asset_key
from tests.service.lineage_assets.conftest import ORDERS_ARROW, commit_retrying
from tests.support.new_orders_pause import new_orders_sensor_paused

defs = build_definitions(StackSettings.from_env())

#: enough days to tell one run and one Spark application per day from one for the range (each day costs a Spark run)
DAYS = 2
LAUNCH = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on UnauthorizedError { message }
  }
}
"""


@pytest.fixture(scope="module")
def days() -> list[dt.date]:
    """DAYS days of 2025 no other test writes, with a day before and after them that the backfill must not touch."""
    first = dt.date(2025, 1, 2) + dt.timedelta(days=random.randrange(0, 350))
    return [first + dt.timedelta(days=i) for i in range(-1, DAYS + 1)]


def orders_for(days: list[dt.date], seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "order_id": f"backfill-{day}-{i}",
            "item": "Lamp",
            "price": Decimal(rng.randint(100, 9000)) / 100,
            "supplier": rng.choice(["Alice", "Bob", "Carol", "Jane"]),
            "bid_time": dt.datetime.combine(day, dt.time()) + dt.timedelta(seconds=rng.randrange(86400)),
        }
        for day in days
        for i in range(40)
    ]


def stats_table(settings, pipeline, days):
    """default.supplier_stats, created by one in-process materialization of a day outside the range if missing."""
    catalog = load_catalog(settings)
    name = pipeline.dataset("iceberg_supplier_stats").symlinks[0].name
    if not catalog.table_exists(name):
        result = dg.materialize(
            [*defs.assets],
            selection=[asset_key(pipeline.dataset("iceberg_supplier_stats"))],
            partition_key=(days[0] - dt.timedelta(days=30)).isoformat(),
            resources=defs.resources,
            raise_on_error=False,
        )
        assert result.success
    return catalog.load_table(name)


def rows_of(table, day: dt.date) -> set[tuple]:
    found = table.refresh().scan(row_filter=f"bid_date = '{day.isoformat()}'").to_arrow().to_pylist()
    return {(r["supplier"], r["bid_date"], r["bid_hour"], r["total_price"], r["total_count"]) for r in found}


def expected(orders_table, day: dt.date) -> set[tuple]:
    """supplier_stats of ``day`` computed here from what Iceberg orders holds for it."""
    start = dt.datetime.combine(day, dt.time())
    scan = orders_table.refresh().scan(
        row_filter=And(
            GreaterThanOrEqual("bid_time", start.isoformat()),
            LessThan("bid_time", (start + dt.timedelta(days=1)).isoformat()),
        )
    )
    totals: dict[tuple, list] = defaultdict(lambda: [Decimal("0"), 0])
    for r in scan.to_arrow().to_pylist():
        if r["price"] is None or r["price"] < 0:
            continue
        totals[(r["supplier"], day, r["bid_time"].hour)][0] += r["price"]
        totals[(r["supplier"], day, r["bid_time"].hour)][1] += 1
    return {(*k, v[0].quantize(Decimal("0.01")), v[1]) for k, v in totals.items()}


def launch_backfill(settings, key: dg.AssetKey, partitions: list[str]) -> str:
    params = {"assetSelection": [{"path": list(key.path)}], "partitionNames": partitions, "title": "test backfill"}
    response = requests.post(
        f"http://{settings.host}:{settings.dagster_port}/graphql",
        json={"query": LAUNCH, "variables": {"params": params}},
        timeout=60,
    )
    response.raise_for_status()
    result = response.json()["data"]["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    return result["backfillId"]


def test_a_multi_day_backfill_runs_one_spark_application_and_one_lineage_run_per_day(
    settings, pipeline, days, stack_instance
):
    target = pipeline.dataset("iceberg_orders")
    orders_table, _ = ensure_orders_table(load_catalog(settings), target.symlinks[0].name, target)
    table = stats_table(settings, pipeline, days)
    with new_orders_sensor_paused(settings):
        backfill_and_check(settings, pipeline, stack_instance, orders_table, table, days)


def backfill_and_check(settings, pipeline, instance, orders_table, table, days) -> None:
    inside, before, after = days[1:-1], days[0], days[-1]
    target = pipeline.dataset("iceberg_supplier_stats")
    key = asset_key(target)
    # rows that must survive (the days around the range) and a stale row that must go (a day inside it)
    marker = [
        {"supplier": "untouched", "bid_date": d, "bid_hour": 1, "total_price": Decimal("1.00"), "total_count": 1}
        for d in (before, after)
    ]
    stale = {
        "supplier": "stale",
        "bid_date": inside[1],
        "bid_hour": 2,
        "total_price": Decimal("2.00"),
        "total_count": 2,
    }
    commit_retrying(table, lambda t: t.append(pa.Table.from_pylist([*marker, stale], schema=t.schema().as_arrow())))
    commit_retrying(orders_table, lambda t: t.append(pa.Table.from_pylist(orders_for(inside), schema=ORDERS_ARROW)))
    around = {d: rows_of(table, d) for d in (before, after)}

    backfill_id = launch_backfill(settings, key, [d.isoformat() for d in inside])
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        backfill = instance.get_backfill(backfill_id)
        if backfill.status not in (BulkActionStatus.REQUESTED, BulkActionStatus.FAILING, BulkActionStatus.CANCELING):
            break
        time.sleep(5)
    runs = [
        r.dagster_run for r in instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    ]
    states = {r.tags.get("dagster/partition"): r.status.value for r in runs}
    assert backfill.status in (BulkActionStatus.COMPLETED_SUCCESS, BulkActionStatus.COMPLETED), (backfill, states)
    assert sorted(states) == [d.isoformat() for d in inside] and set(states.values()) == {"SUCCESS"}, states

    applications = set()
    for run in runs:
        (materialization,) = [
            e.asset_materialization
            for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        ]
        applications.add(materialization.metadata["spark/application_id"].value)
    assert len(applications) == DAYS, f"one Spark application per day: {applications}"

    marquez = MarquezClient(settings.marquez_url)
    dagster_job, spark_job = pipeline.job(DAGSTER_JOB), pipeline.job(target.producer)

    def lineage_runs():
        parents = {r["id"]: r for r in marquez.runs(dagster_job.namespace, dagster_job.name, limit=100)}
        children = marquez.runs(spark_job.namespace, spark_job.name, limit=100)
        return parents, {c["facets"]["parent"]["run"]["runId"] for c in children if "parent" in c.get("facets", {})}

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        parents, children_of = lineage_runs()
        if all(parents.get(r.run_id, {}).get("state") == "COMPLETED" for r in runs):
            break
        time.sleep(3)
    for run in runs:
        day = run.tags["dagster/partition"]
        parent = parents.get(run.run_id)
        assert parent, f"no {dagster_job.name} run {run.run_id} (the Dagster run of {day}) in Marquez"
        assert parent["state"] == "COMPLETED", parent
        # Marquez 0.51.1 keeps a run's own nominal time in its nominalTime facet (its nominalStartTime field is
        # filled only for a parent run created from a child's event)
        nominal_time = (parent.get("facets") or {}).get("nominalTime") or {}
        nominal = dt.datetime.fromisoformat(str(nominal_time.get("nominalStartTime")).replace("Z", "+00:00"))
        assert nominal == dt.datetime.fromisoformat(f"{day}T00:00:00+00:00"), parent
        assert run.run_id in children_of, f"no {spark_job.name} run with the Dagster run {run.run_id} as parent"

    for day in inside:
        assert rows_of(table, day) == expected(orders_table, day), f"supplier_stats of {day}"
        assert not any(r[0] == "stale" for r in rows_of(table, day))
    for day, rows in around.items():
        assert rows_of(table, day) == rows, f"{day} is outside the backfill and must be untouched"
        assert any(r[0] == "untouched" for r in rows)
