"""The drift report and the picture, on graphs rebuilt from hand-written OpenLineage events of the reference lab's
data flow (tests/unit/lineage_assets/checks/reference_lineage.py), changed by hand to make each kind of drift."""

from lineage_assets.checks.drift_report import actual_column_edges, render_html, verify
from lineage_assets.checks.graph import LineageGraph
from tests.unit.lineage_assets.checks.reference_lineage import (
    ARCHIVE,
    COLUMN_EDGES,
    ICEBERG_ORDERS,
    ORDERS,
    SPARK_JOB,
    event,
    whole_pipeline_events,
)
from tests.unit.lineage_assets.checks.test_compare import PIPELINE, whole_pipeline

#: the jobs of the reference flow as the report names them, written out
JOB_NAMES = ["orders-source", "orders-s3-sink", "supplier-stats", "iceberg-ingestion", "dagster", SPARK_JOB]


def test_the_whole_pipeline_has_no_drift_and_every_column_edge():
    graph = whole_pipeline()
    report = verify(PIPELINE, graph)
    assert report.ok, report.text()
    assert len(actual_column_edges(graph)) == COLUMN_EDGES
    assert f"COLUMN LINEAGE: {COLUMN_EDGES} declared edges, {COLUMN_EDGES} in the lineage graph" in report.text()
    assert "no drift" in report.text()


def test_a_missing_and_an_extra_column_edge_are_drift():
    sink = event("orders-s3-sink", run=1)
    lineage = sink["outputs"][0]["facets"]["columnLineage"]["fields"]
    del lineage["item"]
    lineage["price"]["inputFields"].append({"namespace": ORDERS[0], "name": ORDERS[1], "field": "supplier"})
    events = [e for e in whole_pipeline_events() if e["job"]["name"] != "orders-s3-sink"]
    report = verify(PIPELINE, LineageGraph.from_events([*events, sink]))
    assert set(report.drift) == {
        "missing column edge kafka://127.0.0.1:9092/orders.item -> s3://orders-archive/topics/orders.item",
        "extra column edge kafka://127.0.0.1:9092/orders.supplier -> s3://orders-archive/topics/orders.price",
    }, report.text()


def test_before_the_source_has_currency_its_edges_wait_instead_of_drifting():
    events = whole_pipeline_events(currency=False)
    report = verify(PIPELINE, LineageGraph.from_events(events))
    assert report.ok, report.text()
    # source.currency -> orders.currency and orders.currency -> archive.currency wait; Iceberg's currency edge from
    # orders.currency is in the graph already (the table has the column from its deploy)
    assert (
        "2 more wait for optional columns the source does not have yet: "
        "['kafka://127.0.0.1:9092/orders.currency', 'postgres://127.0.0.1:15432/orders_source.public.orders.currency']"
    ) in report.text()
    sink = next(e for e in events if e["job"]["name"] == "orders-s3-sink")
    archive = next(o for o in sink["outputs"] if (o["namespace"], o["name"]) == ARCHIVE)
    del archive["facets"]["columnLineage"]["fields"]["item"]
    assert verify(PIPELINE, LineageGraph.from_events(events)).drift == [
        "missing column edge kafka://127.0.0.1:9092/orders.item -> s3://orders-archive/topics/orders.item"
    ], "a required column's edge is still drift"


def test_a_changed_namespace_is_reported_with_both_identities():
    stats = event("supplier-stats", run=95, minute=5)
    stats["inputs"][0]["namespace"] = "kafka://LOCALHOST:9092"
    report = verify(PIPELINE, whole_pipeline(stats))
    assert not report.ok
    drift = "\n".join(report.drift)
    assert "kafka://127.0.0.1:9092/orders" in drift and "kafka://LOCALHOST:9092/orders" in drift
    assert "job supplier-stats: missing input kafka://127.0.0.1:9092/orders" in drift
    assert "job supplier-stats: extra input kafka://LOCALHOST:9092/orders" in drift


def test_an_empty_graph_misses_every_job_and_the_picture_says_so():
    report = verify(PIPELINE, LineageGraph())
    assert {f"job lineage-lab/{name} is not in the lineage graph" for name in JOB_NAMES} <= set(report.drift)
    page = render_html(LineageGraph(), report)
    assert page.startswith("<!doctype html>") and "is not in the lineage graph" in page


def test_the_picture_draws_every_job_and_dataset():
    graph = whole_pipeline()
    page = render_html(graph, verify(PIPELINE, graph))
    for job in JOB_NAMES:
        assert f">{job}</text>" in page
    # 6 jobs, and the datasets their events name: source, orders, archive, supplier-stats, Iceberg orders and
    # supplier_stats, three dead-letter topics
    assert page.count("<rect") == 6 + 9


def test_a_spark_applications_child_jobs_carry_its_datasets_and_spark_type_names_match():
    """The Spark listener reports the application job without datasets and an action job under it with them,
    in Spark's own type names (integer, long)."""
    events = whole_pipeline_events()
    app = next(e for e in events if e["job"]["name"] == SPARK_JOB)
    child = event(SPARK_JOB, run="aa")
    child["job"]["name"] = f"{SPARK_JOB}.overwrite_by_expression.lakehouse_default_supplier_stats"
    child["run"]["facets"]["parent"] = {
        "run": {"runId": app["run"]["runId"]},
        "job": {"namespace": "lineage-lab", "name": SPARK_JOB},
    }
    child["outputs"][0]["facets"]["schema"]["fields"] = [
        {"name": "supplier", "type": "string"},
        {"name": "bid_date", "type": "date"},
        {"name": "bid_hour", "type": "integer"},
        {"name": "total_price", "type": "decimal(10,2)"},
        {"name": "total_count", "type": "long"},
    ]
    app["inputs"], app["outputs"] = [], []
    report = verify(PIPELINE, LineageGraph.from_events([*events, child]))
    assert report.ok, report.text()
    child["inputs"][0]["name"] = "default/orders_v2"
    report = verify(PIPELINE, LineageGraph.from_events([*events, child]))
    assert f"job {SPARK_JOB}: missing input {ICEBERG_ORDERS[0]}/{ICEBERG_ORDERS[1]}" in report.drift
