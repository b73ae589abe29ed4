"""The main job end to end on the stack, judged by what Marquez holds: deploy everything, orders through CDC,
Kafka, the archive, both Flink jobs and Iceberg, today's supplier_stats. Then Marquez has every event with its
facets, one job per name, the reference lab's graph (jobs, datasets, edges, every column edge: written out by hand
here and in tests/unit/lineage_assets/checks/reference_lineage.py, read back from Marquez's REST API), Iceberg orders
as one node between ingestion and Spark, column lineage back to the Postgres source, and the Dagster run as the Spark
job's parent, ended. An identity posted straight to Marquez, and a field changed there, are caught and explained."""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import dagster as dg
import pytest
import requests
from openlineage.client.serde import Serde

from lineage_assets.checks.drift_report import verify_and_render
from lineage_assets.kafka.observed import observed_event_builder
from lineage_assets.lineage.events import EventBuilder, RunState
from lineage_assets.lineage.identity import DAGSTER_JOB
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.lineage.outbox import Outbox
from lineage_assets.metadata import asset_key
from tests.service.lineage_assets.conftest import upstream_columns, wait_for_batch_side
from tests.support.engine_waits import wait_for_delivery
from tests.unit.lineage_assets.checks.reference_lineage import (
    ARCHIVE,
    COLUMN_LINEAGE,
    DLQ_INGESTION,
    DLQ_SINK,
    DLQ_STATS,
    ICEBERG_ORDERS,
    ICEBERG_STATS,
    ORDERS,
    SCHEMAS,
    SOURCE,
    STATS,
)

JOBS_NAMESPACE = "lineage-lab"
#: the reference lab's data flow (plus each job's dead-letter topic) as Marquez files it: job -> (inputs, outputs).
#: The Spark application's edges are on its action jobs, named under it.
EXPECTED_JOBS = {
    "orders-source": ({SOURCE}, {ORDERS}),
    "orders-s3-sink": ({ORDERS}, {ARCHIVE, DLQ_SINK}),
    "supplier-stats": ({ORDERS}, {STATS, DLQ_STATS}),
    "iceberg-ingestion": ({ORDERS}, {ICEBERG_ORDERS, DLQ_INGESTION}),
    "dagster.supplier_stats.create_table.default_supplier_stats": (set(), {ICEBERG_STATS}),
    "dagster.supplier_stats.overwrite_by_expression.lakehouse_default_supplier_stats": (
        {ICEBERG_ORDERS},
        {ICEBERG_STATS},
    ),
}
#: (input dataset, input column, output dataset, output column), from the hand-written column lineage
EXPECTED_COLUMN_EDGES = {
    (src, src_col, out, col)
    for out, columns in COLUMN_LINEAGE.items()
    for col, sources in columns.items()
    for src, src_col in sources
}
#: the datasets whose currency column exists only once the source team has added it to the Postgres table: whether
#: the schema-evolution test ran before decides it, so it is not judged here but there
#: (test_schema_evolution.py::test_marquez_holds_new_versions_with_currency_and_its_column_lineage)
CURRENCY_FOLLOWS_THE_SOURCE = {SOURCE, ORDERS, ARCHIVE}


def follows_the_source(dataset: tuple[str, str], column: str) -> bool:
    return column == "currency" and dataset in CURRENCY_FOLLOWS_THE_SOURCE


@pytest.fixture(scope="module")
def ran(pipeline_ran, flink_jobs_run):
    """What the main job printed, with both Flink jobs running: `wait_for_batch_side` waits for every owed day's run,
    which the new-orders sensor asks for only with a materialization of Iceberg orders, so never while an earlier
    module left iceberg-ingestion cancelled (the fresh-clone run of b5e4d76 waited 420 s so, after
    test_iceberg_ingestion)."""
    return pipeline_ran


@pytest.fixture(scope="module")
def marquez(settings):
    return MarquezClient(settings.marquez_url)


def marquez_job_edges(settings) -> dict[str, tuple[set, set]]:
    """Every job of the pipeline's namespace in the lineage graph around the Postgres source, with the datasets of
    its in- and out-edges, from Marquez's lineage API."""
    graph = requests.get(
        f"{settings.marquez_url}/api/v1/lineage",
        params={"nodeId": f"dataset:{SOURCE[0]}:{SOURCE[1]}", "depth": 20},
        timeout=30,
    ).json()["graph"]
    nodes = {n["id"]: n for n in graph}

    def identity(node_id: str) -> tuple[str, str]:
        data = nodes[node_id]["data"]
        return data["namespace"], data["name"]

    return {
        n["data"]["name"]: (
            {identity(e["origin"]) for e in n.get("inEdges") or []},
            {identity(e["destination"]) for e in n.get("outEdges") or []},
        )
        for n in graph
        if n["type"] == "JOB" and n["data"]["namespace"] == JOBS_NAMESPACE
    }


def marquez_dataset(settings, identity: tuple[str, str]) -> dict:
    ns, name = identity
    resp = requests.get(
        f"{settings.marquez_url}/api/v1/namespaces/{quote(ns, safe='')}/datasets/{quote(name, safe='')}", timeout=30
    )
    assert resp.status_code == 200, f"{ns}/{name}: HTTP {resp.status_code} {resp.text[:200]}"
    return resp.json()


def marquez_column_edges(settings) -> set[tuple]:
    """The column lineage Marquez holds for the pipeline's outputs, from its datasets API."""
    edges = set()
    for out in COLUMN_LINEAGE:
        for column in marquez_dataset(settings, out).get("columnLineage") or []:
            for f in column.get("inputFields") or []:
                edges.add(((f["namespace"], f["dataset"]), f["field"], out, column["name"]))
    return edges


def test_the_graph_in_marquez_is_the_reference_graph(settings, ran):
    expected_columns = {edge for edge in EXPECTED_COLUMN_EDGES if not follows_the_source(edge[0], edge[1])}
    # whatever the lineage outbox had queued (the main run's events, and those of tests before this one) is in Marquez
    wait_for_delivery(settings, time.time())
    jobs = marquez_job_edges(settings)
    columns = {e for e in marquez_column_edges(settings) if not follows_the_source(e[0], e[1])}
    assert jobs == EXPECTED_JOBS
    assert columns == expected_columns, (
        f"missing {sorted(expected_columns - columns)}, extra {sorted(columns - expected_columns)}"
    )
    for identity, fields in SCHEMAS.items():
        not_judged = {name for name, _ in fields if follows_the_source(identity, name)}
        dataset = marquez_dataset(settings, identity)
        assert not dataset["deleted"], identity
        held = {f["name"] for f in dataset["fields"]}
        assert held - not_judged == {name for name, _ in fields} - not_judged, identity

    counted = re.search(r"(\d+) checks: (\d+) passed, (\d+) warned, (\d+) failed", ran)
    assert counted and counted.group(4) == "0" and "no drift" in ran, ran
    # a warning may only be a data-quality alarm (earlier tests leave poison in the topic), never a lineage check
    assert all(" dead_letter_share: " in line for line in ran.splitlines() if line.strip().startswith("WARNING")), ran


def test_the_main_command_prints_a_short_progress_report(settings, ran):
    """One line per step with its duration and result, no Dagster event (they are in the runs' log and the UI)."""
    lines = ran.splitlines()
    assert len(lines) <= 60, f"{len(lines)} lines:\n{ran}"
    assert "DEBUG" not in ran, ran
    steps = [line for line in lines if re.match(r"  \S.* +\d+\.\d s  (ok|WARN|FAILED)", line)]
    assert len(steps) == 9, ran
    assert f"{settings.dagster_url}/runs/" in ran, ran
    log = re.search(r"console output: (\S+\.log)", ran)
    assert log and Path(log.group(1)).parent == settings.logs_dir / "pipeline", ran
    assert "STEP_SUCCESS" in Path(log.group(1)).read_text(), "the runs' console output is in their log"


def test_each_engine_job_is_one_marquez_job_under_its_declared_name(settings, ran, pipeline, marquez):
    wait_for_batch_side(settings)
    declared = {j.name for j in pipeline.jobs.values()}
    for namespace in {j.namespace for j in pipeline.jobs.values()}:
        for job in marquez.jobs(namespace):
            parent = job.get("parentJobName")
            # Spark's action jobs are children of the declared application job, named under it
            assert job["name"] in declared or (parent in declared and job["name"].startswith(parent + ".")), job
            assert "__" not in job["name"], f"{job['name']} is named after a Dagster internal"
            if job["name"] in declared:
                assert parent == pipeline.job(job["name"]).parent, job["name"]
            latest = job.get("latestRun") or {}
            if job["name"] == DAGSTER_JOB or parent:
                assert latest.get("state") == "COMPLETED", f"{job['name']}: a batch run left {latest.get('state')}"


def event_key(event: dict) -> tuple[str, str, dt.datetime]:
    """(run, type, time) of an event; Marquez rewrites eventTime (drops trailing zeros, nanoseconds) so compare
    instants, to the microsecond."""
    match = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", event["eventTime"])
    assert match, event["eventTime"]
    base, fraction, zone = match.groups()
    when = dt.datetime.fromisoformat(f"{base}.{(fraction or '0')[:6]:0<6}{'+00:00' if zone == 'Z' else zone}")
    return event["run"]["runId"], event["eventType"], when


def test_every_event_of_the_run_is_in_marquez_with_its_facets(settings, ran, pipeline, marquez):
    sent = Outbox(settings.lineage_outbox).events(("sent",))
    stored = {event_key(e): e for e in marquez.events()}
    missing = [(e["job"]["name"], e["eventType"]) for e in sent if event_key(e) not in stored]
    assert not missing, f"sent but not in Marquez: {missing}"

    streaming = {j.name for j in pipeline.jobs.values() if j.processing_type == "STREAMING"}
    seen = {"schema": 0, "columnLineage": 0, "symlinks": 0, "parent": 0, "dagster_run": 0}
    for e in (stored[event_key(s)] for s in sent):
        name = e["job"]["name"]
        job_type = (e["job"].get("facets") or {}).get("jobType") or {}
        if name in streaming:
            assert job_type.get("processingType") == "STREAMING", f"{name} {e['eventType']} has no STREAMING jobType"
            seen["dagster_run"] += "dagster_run" in (e["run"].get("facets") or {})
        for ds in (e.get("inputs") or []) + (e.get("outputs") or []):
            facets = ds.get("facets") or {}
            seen["schema"] += "schema" in facets
            seen["columnLineage"] += "columnLineage" in facets
            seen["symlinks"] += "symlinks" in facets
        parent = (e["run"].get("facets") or {}).get("parent")
        if parent:
            seen["parent"] += 1
            assert name.startswith(parent["job"]["name"] + "."), f"{name} would be renamed under its parent"
    assert all(seen.values()), f"facets seen in Marquez's events: {seen}"


def test_the_dagster_run_is_the_spark_jobs_parent_and_ended(ran, pipeline, marquez):
    spark = pipeline.job(pipeline.dataset("iceberg_supplier_stats").producer)
    (latest,) = marquez.runs(spark.namespace, spark.name, limit=1)
    parent = latest["facets"]["parent"]
    assert parent["job"] == {"namespace": spark.namespace, "name": DAGSTER_JOB}
    dagster_run = marquez.run(parent["run"]["runId"])
    assert dagster_run["state"] == "COMPLETED"
    assert dagster_run["jobVersion"]["name"] == DAGSTER_JOB
    assert (
        dagster_run["facets"]["dagster_run"]["assetKey"]
        == asset_key(pipeline.dataset("iceberg_supplier_stats")).to_user_string()
    )


def test_iceberg_orders_is_one_node_written_by_ingestion_and_read_by_spark(ran, pipeline, marquez):
    orders = pipeline.dataset("iceberg_orders")
    spark = pipeline.job(pipeline.dataset("iceberg_supplier_stats").producer)
    nodes = {n["id"]: n for n in marquez.lineage(orders.node_id, depth=1)}
    node = nodes[orders.node_id]
    writers = {e["origin"] for e in node["inEdges"]}
    readers = {e["destination"] for e in node["outEdges"]}
    assert writers == {pipeline.job("iceberg-ingestion").node_id}
    assert readers and all(r.startswith(spark.node_id + ".") or r == spark.node_id for r in readers), readers
    symlink = orders.symlinks[0]
    assert f"dataset:{symlink.namespace}:{symlink.name}" not in nodes, "the catalog name is an alias, not a node"


@pytest.mark.parametrize("output", ["iceberg_supplier_stats", "kafka_supplier_stats"])
def test_total_price_derives_from_the_postgres_price_column(ran, pipeline, marquez, output):
    source = pipeline.dataset("source_orders")
    found = upstream_columns(marquez, pipeline.dataset(output).node_id, "total_price")
    assert (source.namespace, source.name, "price") in found, found


def run_check(settings, check: str, key: dg.AssetKey) -> dg.AssetCheckEvaluation:
    from lineage_assets.definitions import build_definitions

    defs = build_definitions(settings)
    result = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=dg.AssetSelection.checks(dg.AssetCheckKey(key, check)),
        resources=defs.resources,
        raise_on_error=False,
    )
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


@pytest.fixture
def intruder(settings, pipeline):
    """A job outside the pipeline that posts straight to Marquez; removed from Marquez afterwards."""
    namespace, name = "lineage-lab-tests", f"intruder-{uuid.uuid4().hex[:8]}"
    posted: list[tuple[str, str]] = []

    def post(event: dict) -> None:
        event = {**event, "job": {**event["job"], "namespace": namespace, "name": name}}
        event["run"] = {"runId": str(uuid.uuid4()), "facets": {}}
        resp = requests.post(f"{settings.marquez_url}/api/v1/lineage", json=event, timeout=10)
        assert resp.status_code < 300, resp.text
        posted.extend((d["namespace"], d["name"]) for d in event["inputs"] + event["outputs"])

    yield post
    api = f"{settings.marquez_url}/api/v1/namespaces"
    requests.delete(f"{api}/{quote(namespace, safe='')}/jobs/{quote(name, safe='')}", timeout=10)
    declared = {(d.namespace, d.name) for d in pipeline.datasets.values()}
    for ns, ds in set(posted) - declared:
        requests.delete(f"{api}/{quote(ns, safe='')}/datasets/{quote(ds, safe='')}", timeout=10)


def test_a_second_identity_posted_to_marquez_fails_check_e_and_verify(settings, ran, pipeline, intruder, tmp_path):
    orders = pipeline.dataset("kafka_orders")
    event = Serde.to_dict(EventBuilder(pipeline).event("orders-s3-sink", RunState.RUNNING, str(uuid.uuid4())))
    event["inputs"][0]["namespace"] = "kafka://localhost:9092"  # a producer that spells the broker by hand
    intruder(event)

    report, picture = verify_and_render(settings, tmp_path / "graph.html")
    assert not report.ok
    text = report.text()
    assert "kafka://127.0.0.1:9092/orders" in text and "kafka://localhost:9092/orders" in text
    assert "Marquez only" in text
    assert "localhost" in picture.read_text()

    evaluation = run_check(settings, "lineage_single_identity", asset_key(orders))
    assert not evaluation.passed
    assert "kafka://127.0.0.1:9092/orders" in evaluation.description
    assert "kafka://localhost:9092/orders" in evaluation.description
    assert "Marquez holds something else" in evaluation.description


def intruding(builder, job: str) -> dict:
    """A whole run of ``job`` in one COMPLETE event with its datasets, as another producer would post it (the
    project's own streaming runs end naming no dataset, so the event is built as a RUNNING and completes here)."""
    event = Serde.to_dict(builder.event(job, RunState.RUNNING, str(uuid.uuid4())))
    return {**event, "eventType": "COMPLETE"}


def test_a_field_changed_in_marquez_fails_check_b(settings, ran, pipeline, intruder):
    archive = pipeline.dataset("archive_orders")
    builder, _ = observed_event_builder(pipeline, settings.schema_registry_url)  # what the emitters say now
    event = intruding(builder, "orders-s3-sink")
    out = next(o for o in event["outputs"] if o["name"] == archive.name)
    out["facets"]["schema"]["fields"].append({"name": "coupon", "type": "string"})
    event["inputs"] = []
    event["outputs"] = [out]
    intruder(event)
    try:
        evaluation = run_check(settings, "lineage_schema_matches", asset_key(archive))
        assert not evaluation.passed
        assert "coupon" in evaluation.description and "Marquez holds something else" in evaluation.description
    finally:  # give the archive its declared schema back (a new version), as its producer will on its next event
        fixed = intruding(builder, "orders-s3-sink")
        fixed["inputs"] = []
        fixed["outputs"] = [o for o in fixed["outputs"] if o["name"] == archive.name]
        intruder(fixed)
    assert run_check(settings, "lineage_schema_matches", asset_key(archive)).passed


def test_an_upstream_schema_change_warns_or_fails_check_f_downstream(settings, ran, pipeline, intruder):
    orders = pipeline.dataset("kafka_orders")
    builder, _ = observed_event_builder(pipeline, settings.schema_registry_url)  # what the emitters say now

    def post_orders_schema(change) -> None:
        event = intruding(builder, "orders-source")
        out = next(o for o in event["outputs"] if o["name"] == orders.name)
        change(out["facets"]["schema"]["fields"])
        event["inputs"], event["outputs"] = [], [out]
        intruder(event)

    def drop_price(fields: list) -> None:
        fields[:] = [f for f in fields if f["name"] != "price"]

    iceberg, stats = (asset_key(pipeline.dataset(k)) for k in ("iceberg_orders", "kafka_supplier_stats"))
    try:
        post_orders_schema(lambda fields: fields.append({"name": "coupon", "type": "string"}))
        gained = run_check(settings, "lineage_upstream_schema", iceberg)
        assert not gained.passed and gained.severity == dg.AssetCheckSeverity.WARN, gained.description
        assert "coupon" in gained.description

        post_orders_schema(drop_price)
        gone = run_check(settings, "lineage_upstream_schema", stats)
        assert not gone.passed and gone.severity == dg.AssetCheckSeverity.ERROR, gone.description
        assert "price" in gone.description and "supplier-stats" in gone.description
    finally:  # the declared schema back (a new version), as the connector will send on its next event
        post_orders_schema(lambda fields: None)
    assert run_check(settings, "lineage_upstream_schema", iceberg).passed
