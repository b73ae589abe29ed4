"""The main job end to end on the stack: deploy everything, orders through CDC, Kafka, the archive, both Flink jobs
and Iceberg, today's supplier_stats; then the lineage graph equals the declared one (jobs, datasets, edges and
every column edge) and every asset check passes. A producer that names a dataset differently is caught by check (e)
and the drift report, both naming the two identities."""

from __future__ import annotations

import datetime as dt
import shutil

import dagster as dg
import pytest
from openlineage.client.serde import Serde

from lineage_assets.checks.graph import LineageGraph
from lineage_assets.checks.verify import actual_column_edges, expected_column_edges, verify_and_render
from lineage_assets.lineage.events import EventBuilder, RunState, run_id_for
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.outbox import Outbox
from lineage_assets.main_run import run_pipeline
from lineage_assets.resources import LineageResource


@pytest.fixture(scope="module")
def ran(settings):
    lines: list[str] = []
    assert run_pipeline(settings, orders=100, log=lines.append), "\n".join(lines)
    return "\n".join(lines)


def test_the_lineage_graph_is_the_declared_graph(settings, ran):
    pipeline = Pipeline.from_settings(settings)
    graph = LineageGraph.from_events(Outbox(settings.lineage_outbox).events())
    for job in pipeline.jobs.values():
        inputs, outputs = graph.io_with_children((job.namespace, job.name))
        assert inputs == {(pipeline.dataset(k).namespace, pipeline.dataset(k).name) for k in job.inputs}, job.name
        assert outputs == {(pipeline.dataset(k).namespace, pipeline.dataset(k).name) for k in job.outputs}, job.name
    assert expected_column_edges(pipeline) <= actual_column_edges(graph), "column lineage on every hop"
    assert "checks passed" in ran and "drift report" in ran
    assert " 0 of " not in ran


def test_a_producer_with_another_namespace_fails_check_e_and_verify(settings, ran, tmp_path):
    drifted = tmp_path / "outbox.sqlite"
    shutil.copy(settings.lineage_outbox, drifted)
    pipeline = Pipeline.from_settings(settings)
    run_id = run_id_for("orders-s3-sink", dt.datetime.now(dt.UTC), "drift-test")
    event = Serde.to_dict(EventBuilder(pipeline).event("orders-s3-sink", RunState.RUNNING, run_id))
    event["inputs"][0]["namespace"] = "kafka://localhost:9092"  # the sink's producer built its identity by hand
    Outbox(drifted).enqueue(event)

    report, picture = verify_and_render(settings, tmp_path / "graph.html", outbox=drifted)
    assert not report.ok
    text = report.text()
    assert "kafka://127.0.0.1:9092/orders" in text and "kafka://localhost:9092/orders" in text
    assert "localhost" in picture.read_text()

    from lineage_assets.definitions import defs

    result = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=dg.AssetSelection.checks(
            dg.AssetCheckKey(dg.AssetKey(["kafka", "orders"]), "lineage_single_identity")
        ),
        resources={
            **defs.resources,
            "lineage": LineageResource(outbox_path=str(drifted), backend_url=settings.marquez_url),
        },
        raise_on_error=False,
    )
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed
    assert "kafka://127.0.0.1:9092/orders" in evaluation.description
    assert "kafka://localhost:9092/orders" in evaluation.description
