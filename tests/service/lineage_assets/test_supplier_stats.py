"""supplier_stats for real: known orders written to Iceberg default.orders (with pyiceberg), the asset
materialized for two days through Dagster with Spark, the result compared with an aggregation computed here, and
the Spark listener's lineage checked against the identity module."""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
from decimal import Decimal

import pytest
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

from infra.services.iceberg_catalog import load_catalog
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.lineage.identity import DAGSTER_JOB, Pipeline
from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB as SPARK_JOB
from lineage_assets.lineage.resource import LineageResource
from tests.service.lineage_assets.conftest import commit_retrying
from tests.support.new_orders_pause import new_orders_sensor_paused
from tests.support.supplier_stats_days import actual_stats, expected_stats, known_orders, materialize, write_orders


@pytest.fixture(scope="module", autouse=True)
def daemon_leaves_these_days_alone(settings):
    """The stack's sensor would recompute the days this module writes while it materializes them itself."""
    with new_orders_sensor_paused(settings):
        yield


@pytest.fixture(scope="module")
def days() -> list[dt.date]:
    first = dt.date(2024, 1, 1) + dt.timedelta(days=random.randrange(0, 360))
    return [first, first + dt.timedelta(days=1)]


@pytest.fixture(scope="module")
def orders_table(settings, pipeline, days):
    target = pipeline.dataset("iceberg_orders")
    table, _ = ensure_orders_table(load_catalog(settings), target.symlinks[0].name, target)
    start = dt.datetime.combine(days[0], dt.time())
    end = start + dt.timedelta(days=2)
    window = And(GreaterThanOrEqual("bid_time", start.isoformat()), LessThan("bid_time", end.isoformat()))
    commit_retrying(table, lambda t: t.delete(window))
    return table


@pytest.fixture(scope="module")
def lineage(resources) -> LineageResource:
    return resources["lineage"]


def test_two_days_equal_an_independent_aggregation_and_days_are_independent(settings, orders_table, days, lineage):
    rows = known_orders(days)
    rows.append({**rows[0], "order_id": "neg", "price": Decimal("-5.00")})
    rows.append({**rows[1], "order_id": "null", "price": None})
    rows.append({**rows[3], "order_id": "no-supplier", "supplier": " "})  # day 2, like rows[1]
    write_orders(orders_table, rows)

    for day in days:
        result = materialize(settings, day, lineage)
        assert result.success
        assert actual_stats(settings, day) == expected_stats(rows, day)
    meta = result.asset_materializations_for_node("iceberg__default__supplier_stats")[0].metadata
    assert meta["dagster/row_count"].value == len(expected_stats(rows, days[1]))
    assert meta["rejected_orders"].value == 2, "the null price and the empty supplier of day 2 are counted, not summed"
    assert meta["partition"].value == days[1].isoformat()
    assert meta["spark/application_id"].value.startswith("local-")
    assert int(meta["iceberg/snapshot_id"].value) > 0
    assert meta["dagster/uri"].value.endswith("/default/supplier_stats")
    deps = meta["dagster/column_lineage"].value.deps_by_column
    assert [d.column_name for d in deps["total_price"]] == ["price"]

    day2_before = actual_stats(settings, days[1])
    write_orders(
        orders_table, [{**rows[2], "order_id": "late", "bid_time": dt.datetime.combine(days[0], dt.time(23, 59))}]
    )
    assert materialize(settings, days[0], lineage).success
    assert actual_stats(settings, days[0]) == expected_stats(
        [*rows, {**rows[2], "order_id": "late", "bid_time": dt.datetime.combine(days[0], dt.time(23, 59))}], days[0]
    )
    assert actual_stats(settings, days[1]) == day2_before, "re-materializing one day leaves the other untouched"


def test_a_day_without_orders_gives_zero_rows(settings, orders_table, lineage):
    empty = dt.date(2024, 12, 31)
    result = materialize(settings, empty, lineage)
    assert result.success
    meta = result.asset_materializations_for_node("iceberg__default__supplier_stats")[0].metadata
    assert meta["dagster/row_count"].value == 0


def test_listener_lineage_joins_the_ingestion_output_and_nests_under_the_dagster_run(
    settings, lineage, orders_table, days
):
    pipeline = Pipeline.from_settings(settings)
    with sqlite3.connect(lineage.outbox_path) as db:
        events = [json.loads(p) for (p,) in db.execute("SELECT payload FROM events ORDER BY seq")]
    assert events, "the Spark listener's events were queued"
    ingestion_output = pipeline.dataset("iceberg_orders")
    inputs = {(i["namespace"], i["name"]) for e in events for i in e.get("inputs", [])}
    assert inputs == {(ingestion_output.namespace, ingestion_output.name)}, "one dataset node for iceberg orders"
    target = pipeline.dataset("iceberg_supplier_stats")
    outputs = [
        o
        for e in events
        for o in e.get("outputs", [])
        if (o["namespace"], o["name"]) == (target.namespace, target.name)
    ]
    lineage_fields = [o["facets"]["columnLineage"]["fields"] for o in outputs if "columnLineage" in o.get("facets", {})]
    assert lineage_fields, "the output carries column lineage"
    fields = lineage_fields[-1]
    sources = {col: {i["field"] for i in f["inputFields"]} for col, f in fields.items()}
    assert sources["supplier"] == {"supplier"}
    assert sources["bid_date"] == {"bid_time"} and sources["bid_hour"] == {"bid_time"}
    assert sources["total_price"] == {"price"}
    parents = {e["run"]["facets"]["parent"]["job"]["name"] for e in events if "parent" in e["run"].get("facets", {})}
    assert parents == {DAGSTER_JOB, SPARK_JOB}, "the application under the Dagster job, its actions under it"
    for e in events:
        assert e["job"]["name"] == DAGSTER_JOB or e["job"]["name"].startswith(DAGSTER_JOB + "."), e["job"]["name"]
    dagster_runs = {e["run"]["runId"] for e in events if e["job"]["name"] == DAGSTER_JOB}
    for run_id in dagster_runs:
        kinds = [e["eventType"] for e in events if e["run"]["runId"] == run_id]
        assert kinds[0] == "START" and kinds[-1] in ("COMPLETE", "FAIL"), "every Dagster parent run ends"


def test_missing_upstream_names_the_table_and_the_asset(settings, lineage):
    result = materialize(settings, dt.date(2024, 6, 1), lineage, config={"source_table": "default.no_such_orders"})
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.step_failure_data.error.message
    assert "default.no_such_orders does not exist" in message and "iceberg/default/orders" in message


def test_a_failing_spark_job_fails_the_materialization_and_its_lineage_run(settings, lineage, orders_table, days):
    with sqlite3.connect(lineage.outbox_path) as db:
        (before,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
    # a source with the wrong shape: the aggregation's query fails inside Spark
    result = materialize(settings, days[0], lineage, config={"source_table": "default.supplier_stats"})
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert f"Spark job {SPARK_JOB} failed" in failure.step_failure_data.error.message
    with sqlite3.connect(lineage.outbox_path) as db:
        events = [
            json.loads(p) for (p,) in db.execute("SELECT payload FROM events WHERE seq > ? ORDER BY seq", (before,))
        ]
    app = [e for e in events if e["job"]["name"] == SPARK_JOB]
    assert app and app[-1]["eventType"] == "FAIL", [(e["job"]["name"], e["eventType"]) for e in events]
    assert "AnalysisException" in app[-1]["run"]["facets"]["errorMessage"]["message"]
    parent = [e["eventType"] for e in events if e["job"]["name"] == DAGSTER_JOB]
    assert parent == ["START", "FAIL"], "the Dagster run, parent of the application, ends in FAIL too"
    assert not [e for e in app if e["eventType"] == "COMPLETE"], "no COMPLETE for the failed application"
