"""The drift report and the picture, on graphs rebuilt from the events the project emits."""

from openlineage.client.serde import Serde

from lineage_assets.checks.graph import LineageGraph
from lineage_assets.checks.verify import expected_column_edges, render_html, verify
from lineage_assets.lineage.events import EventBuilder, RunState
from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB as SPARK_JOB
from tests.unit.lineage_assets.checks.test_compare import PIPELINE, emitted, whole_pipeline


def test_the_whole_pipeline_has_no_drift_and_every_declared_column_edge():
    report = verify(PIPELINE, whole_pipeline())
    assert report.ok, report.text()
    assert len(expected_column_edges(PIPELINE)) == sum(
        len(sources)
        for job in PIPELINE.jobs.values()
        for cols in job.column_lineage.values()
        for sources in cols.values()
    )
    assert "no drift" in report.text()


def test_before_the_source_has_currency_its_edges_wait_instead_of_drifting():
    before = EventBuilder(PIPELINE, PIPELINE.observed_columns(None))
    events = [
        Serde.to_dict(before.event(job, RunState.RUNNING, f"0195c1c0-0000-7000-8000-{i:0>12}"))
        for i, job in enumerate(PIPELINE.jobs, start=1)
    ]
    report = verify(PIPELINE, LineageGraph.from_events(events))
    assert report.ok, report.text()
    assert "more wait for optional columns the source does not have yet" in report.text()
    sink = next(e for e in events if e["job"]["name"] == "orders-s3-sink")
    archive = next(o for o in sink["outputs"] if "columnLineage" in o["facets"])
    del archive["facets"]["columnLineage"]["fields"]["item"]
    assert not verify(PIPELINE, LineageGraph.from_events(events)).ok, "a required column's edge is still drift"


def test_a_changed_namespace_is_reported_with_both_identities():
    event = emitted("supplier-stats", RunState.RUNNING, "95", minute=5)
    event["inputs"][0]["namespace"] = "kafka://LOCALHOST:9092"
    report = verify(PIPELINE, whole_pipeline(event))
    assert not report.ok
    drift = "\n".join(report.drift)
    assert "kafka://127.0.0.1:9092/orders" in drift and "kafka://LOCALHOST:9092/orders" in drift
    assert "job supplier-stats: missing input kafka://127.0.0.1:9092/orders" in drift
    assert "job supplier-stats: extra input kafka://LOCALHOST:9092/orders" in drift


def test_an_empty_graph_misses_every_job_and_the_picture_says_so():
    report = verify(PIPELINE, LineageGraph())
    assert {f"job lineage-lab/{name} is not in the lineage graph" for name in PIPELINE.jobs} <= set(report.drift)
    page = render_html(LineageGraph(), report)
    assert page.startswith("<!doctype html>") and "is not in the lineage graph" in page


def test_the_picture_draws_every_job_and_dataset():
    graph = whole_pipeline()
    page = render_html(graph, verify(PIPELINE, graph))
    for job in PIPELINE.jobs:
        assert f">{job}</text>" in page
    assert page.count("<rect") == len(graph.jobs) + len(graph.datasets)


def test_a_spark_applications_child_jobs_carry_its_datasets_and_spark_type_names_match():
    """The Spark listener reports the application job without datasets and an action job under it with them."""
    events = [emitted(job, RunState.RUNNING, str(i)) for i, job in enumerate(PIPELINE.jobs, start=1)]
    app = next(e for e in events if e["job"]["name"] == SPARK_JOB)
    child = {**app, "job": {**app["job"], "name": f"{SPARK_JOB}.overwrite_by_expression.lakehouse_default"}}
    child["run"] = {
        "runId": "0195c1c0-0000-7000-8000-0000000000aa",
        "facets": {
            "parent": {
                "run": {"runId": app["run"]["runId"]},
                "job": {"namespace": app["job"]["namespace"], "name": SPARK_JOB},
            }
        },
    }
    for field in child["outputs"][0]["facets"]["schema"]["fields"]:
        field["type"] = {"int": "integer", "bigint": "long"}.get(field["type"], field["type"])
    app["inputs"], app["outputs"] = [], []
    report = verify(PIPELINE, LineageGraph.from_events([*events, child]))
    assert report.ok, report.text()
