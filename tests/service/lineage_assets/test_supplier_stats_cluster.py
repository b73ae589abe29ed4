"""supplier_stats on a Spark standalone cluster (a master and two workers from PySpark's own distribution, on
loopback ports) by its master URL: the same rows as local mode and as an aggregation this test computes, the
application in the master's REST API, and the same lineage (datasets, schemas, column lineage) as local mode."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections import defaultdict
from decimal import Decimal

import dagster as dg
import pyarrow as pa
import pytest
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

from infra.services.iceberg_catalog import load_catalog
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB as SPARK_JOB
from lineage_assets.resources import build_resources
from lineage_assets.spark.supplier_stats_batch import build_supplier_stats_asset
from tests.service.lineage_assets.conftest import ORDERS_ARROW, commit_retrying, outbox_events
from tests.support.new_orders_pause import new_orders_sensor_paused
from tests.support.spark_cluster import StandaloneCluster

DAY = dt.date(2024, 7, 1)
SUPPLIERS = ["Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack"]


@pytest.fixture(scope="module")
def cluster(settings, tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), host=settings.host) as running:
        yield running


@pytest.fixture(scope="module")
def orders(settings, pipeline) -> list[dict]:
    target = pipeline.dataset("iceberg_orders")
    table, _ = ensure_orders_table(load_catalog(settings), target.symlinks[0].name, target)
    start = dt.datetime.combine(DAY, dt.time())
    end = start + dt.timedelta(days=1)
    window = And(GreaterThanOrEqual("bid_time", start.isoformat()), LessThan("bid_time", end.isoformat()))
    commit_retrying(table, lambda t: t.delete(window))
    rng = random.Random(23)
    rows = [
        {
            "order_id": f"cluster-{i}",
            "item": "Lamp",
            "price": Decimal(rng.randint(100, 15000)) / 100,
            "supplier": rng.choice(SUPPLIERS),
            "bid_time": start + dt.timedelta(seconds=rng.randrange(86400)),
        }
        for i in range(2000)
    ]
    commit_retrying(table, lambda t: t.append(pa.Table.from_pylist(rows, schema=ORDERS_ARROW)))
    return rows


def expected(rows: list[dict]) -> dict:
    totals = defaultdict(lambda: [Decimal(0), 0])
    for r in rows:
        totals[(r["supplier"], DAY, r["bid_time"].hour)][0] += r["price"]
        totals[(r["supplier"], DAY, r["bid_time"].hour)][1] += 1
    return {k: (total.quantize(Decimal("0.01")), count) for k, (total, count) in totals.items()}


def stats_of_the_day(settings, pipeline) -> dict:
    table = load_catalog(settings).load_table(pipeline.dataset("iceberg_supplier_stats").symlinks[0].name)
    rows = table.scan(row_filter=f"bid_date = '{DAY.isoformat()}'").to_arrow().to_pylist()
    return {(r["supplier"], r["bid_date"], r["bid_hour"]): (r["total_price"], r["total_count"]) for r in rows}


def materialize(settings, pipeline, lineage) -> dg.MaterializeResult:
    result = dg.materialize(
        [build_supplier_stats_asset(pipeline)],
        partition_key=DAY.isoformat(),
        resources={**build_resources(settings), "lineage": lineage},
    )
    assert result.success
    return result.asset_materializations_for_node("iceberg__default__supplier_stats")[0].metadata


def lineage_shape(events: list[dict]) -> set:
    """What the Spark listener said about datasets, independent of run ids, times and engine facets. An event that
    names no dataset says nothing about them: the listener sends the START of the `CREATE TABLE IF NOT EXISTS`
    action (a no-op once the table exists) with no dataset in some runs and not at all in others, local mode or
    not (a fresh clone, 2026-12-07); its COMPLETE names the table."""

    def dataset(d: dict) -> tuple:
        facets = d.get("facets", {})
        fields = tuple(sorted((f["name"], f.get("type")) for f in facets.get("schema", {}).get("fields", [])))
        columns = facets.get("columnLineage", {}).get("fields", {})
        lineage = tuple(
            sorted((c, tuple(sorted((i["name"], i["field"]) for i in f["inputFields"]))) for c, f in columns.items())
        )
        return d["namespace"], d["name"], fields, lineage

    return {
        (
            e["job"]["name"],
            e["eventType"],
            tuple(sorted(map(dataset, e.get("inputs", [])))),
            tuple(sorted(map(dataset, e.get("outputs", [])))),
        )
        for e in events
        if e["job"]["name"].startswith(SPARK_JOB) and (e.get("inputs") or e.get("outputs"))
    }


def test_a_partition_on_a_standalone_cluster_equals_local_mode_with_the_same_lineage(
    settings, pipeline, resources, cluster, orders
):
    lineage = resources["lineage"]
    with new_orders_sensor_paused(settings):
        local_meta = materialize(settings, pipeline, lineage)
        local_rows = stats_of_the_day(settings, pipeline)
        local_events = outbox_events(lineage)
        on_cluster = dataclasses.replace(settings, spark_master=cluster.master_url)
        cluster_meta = materialize(on_cluster, pipeline, lineage)
        cluster_rows = stats_of_the_day(settings, pipeline)
        cluster_events = outbox_events(lineage)[len(local_events) :]

    assert cluster_rows == local_rows == expected(orders)
    assert local_meta["spark/application_id"].value.startswith("local-")
    app_id = cluster_meta["spark/application_id"].value
    seen = cluster.state()
    assert app_id in {a["id"] for a in seen["completedapps"]}, f"{app_id} not among the master's applications"
    assert seen["aliveworkers"] == 2
    assert lineage_shape(local_events), "the listener reported the local application"
    assert lineage_shape(cluster_events) == lineage_shape(local_events), "the same lineage as local mode"
    assert any(e["eventType"] == "COMPLETE" for e in cluster_events if e["job"]["name"] == SPARK_JOB)
