"""The six comparisons on graphs rebuilt from hand-written OpenLineage events of the reference lab's data flow
(tests/unit/lineage_assets/checks/reference_lineage.py): all pass on the consistent pipeline, and each kind of
drift, made by changing those events, is caught and named."""

from infra.settings import StackSettings
from lineage_assets.checks.compare import (
    Finding,
    dataset_exists,
    no_second_identity,
    run_state_agrees,
    schema_matches,
    upstream_matches,
    upstream_schema_holds,
)
from lineage_assets.checks.graph import LineageGraph
from lineage_assets.lineage.identity import Pipeline
from tests.unit.lineage_assets.checks.reference_lineage import (
    ARCHIVE,
    CATALOG,
    JOBS_NAMESPACE,
    KAFKA,
    ORDERS,
    SPARK_JOB,
    whole_pipeline_events,
)
from tests.unit.lineage_assets.checks.reference_lineage import event as reference_event

#: the declaration the checks compare with (the identity module, for the embedded stack)
PIPELINE = Pipeline.from_settings(StackSettings())


def whole_pipeline(*extra: dict) -> LineageGraph:
    return LineageGraph.from_events([*whole_pipeline_events(), *extra])


def test_a_consistent_pipeline_passes_every_comparison():
    graph = whole_pipeline()
    for ds in PIPELINE.datasets.values():
        if ds.producer not in PIPELINE.jobs:
            continue  # the source table is written by the generator, not a lineage job
        for finding in (
            dataset_exists(graph, ds),
            schema_matches(graph, ds),
            upstream_matches(graph, ds, PIPELINE),
            run_state_agrees(graph, ds, PIPELINE, "RUNNING"),
            no_second_identity(graph, ds),
            upstream_schema_holds(graph, ds, PIPELINE),
        ):
            assert finding.passed, (ds.key, finding.message)


def test_a_missing_dataset_names_its_producer():
    finding = dataset_exists(LineageGraph(), PIPELINE.dataset("kafka_supplier_stats"))
    assert not finding.passed and "`supplier-stats`" in finding.message


def test_schema_drift_lists_missing_extra_and_type_changes():
    event = reference_event("supplier-stats", "RUNNING", "99", minute=5)
    fields = event["outputs"][0]["facets"]["schema"]["fields"]
    fields[:] = [f for f in fields if f["name"] != "count"] + [{"name": "avg", "type": "double"}]
    fields[0]["type"] = "bytes"
    finding = schema_matches(whole_pipeline(event), PIPELINE.dataset("kafka_supplier_stats"))
    assert not finding.passed
    assert finding.details["missing"] == ["count"] and finding.details["extra"] == ["avg"]
    assert finding.details["types"] == {"window_start": ("string", "bytes")}


def test_a_producer_naming_its_input_differently_breaks_edges_and_is_named_as_a_second_identity():
    event = reference_event("orders-s3-sink", "RUNNING", "98", minute=5)
    event["inputs"][0]["namespace"] = "kafka://localhost:9092"
    graph = whole_pipeline(event)
    archive, orders = PIPELINE.dataset("archive_orders"), PIPELINE.dataset("kafka_orders")
    edges = upstream_matches(graph, archive, PIPELINE)
    assert not edges.passed
    assert edges.details == {"missing": ["kafka://127.0.0.1:9092/orders"], "extra": ["kafka://localhost:9092/orders"]}
    drift = no_second_identity(graph, orders)
    assert not drift.passed
    assert "kafka://127.0.0.1:9092/orders" in drift.message and "kafka://localhost:9092/orders" in drift.message


def test_an_iceberg_table_named_by_its_catalog_name_is_a_second_identity():
    event = reference_event(SPARK_JOB, "COMPLETE", "97", minute=5)
    event["inputs"][0]["namespace"], event["inputs"][0]["name"] = CATALOG, "default.orders"
    finding = no_second_identity(whole_pipeline(event), PIPELINE.dataset("iceberg_orders"))
    assert not finding.passed and "http://127.0.0.1:8181/default.orders" in finding.message


def test_a_stopped_job_left_running_in_lineage_fails_until_its_run_is_closed():
    ds = PIPELINE.dataset("iceberg_orders")
    open_run = whole_pipeline()
    assert not run_state_agrees(open_run, ds, PIPELINE, "CANCELED").passed
    closed = whole_pipeline(reference_event("iceberg-ingestion", "ABORT", "4", minute=9))
    assert run_state_agrees(closed, ds, PIPELINE, "CANCELED").passed
    assert not run_state_agrees(closed, ds, PIPELINE, "RUNNING").passed, "a running job needs an open run"


def test_a_paused_stopped_or_deleted_connector_is_stopped_and_its_run_must_be_closed():
    """The connector sensor aborts a connector's run when Connect says PAUSED, STOPPED or DELETED (connect/runs.py):
    check (d) reads those states as stopped too, never as running."""
    ds = PIPELINE.dataset("archive_orders")
    open_run = whole_pipeline()  # orders-s3-sink's run 2 is RUNNING
    for state in ("PAUSED", "STOPPED", "DELETED"):
        finding = run_state_agrees(open_run, ds, PIPELINE, state, None, "connector orders-s3-sink")
        assert not finding.passed, state
        assert finding.message.startswith(
            f"stale lineage, job stopped: orders-s3-sink (connector orders-s3-sink) is {state} but run "
            "0195c1c0-0000-7000-8000-000000000002 is RUNNING in the lineage graph"
        ), finding.message
    aborted = whole_pipeline(reference_event("orders-s3-sink", "ABORT", 2, minute=9))
    for state in ("PAUSED", "STOPPED", "DELETED"):
        assert run_state_agrees(aborted, ds, PIPELINE, state, None, "connector orders-s3-sink").passed, state
    assert not run_state_agrees(aborted, ds, PIPELINE, "RUNNING", None, "connector orders-s3-sink").passed


def test_a_running_job_needs_its_own_run_open_and_no_other():
    ds = PIPELINE.dataset("iceberg_orders")
    graph = whole_pipeline()
    node = graph.jobs[(JOBS_NAMESPACE, "iceberg-ingestion")]
    node.run_states = {"run-old": "RUNNING", "run-new": "RUNNING"}
    two = run_state_agrees(graph, ds, PIPELINE, "RUNNING", "run-new", "Flink job j2")
    assert not two.passed and "two open runs" in two.message and "run-old" in two.message
    node.run_states = {"run-old": "RUNNING"}
    missing = run_state_agrees(graph, ds, PIPELINE, "RUNNING", "run-new", "Flink job j2")
    assert not missing.passed and "stale lineage, job running" in missing.message and "run-new" in missing.message
    node.run_states = {"run-old": "COMPLETED", "run-new": "RUNNING"}
    assert run_state_agrees(graph, ds, PIPELINE, "RUNNING", "run-new", "Flink job j2").passed
    assert not run_state_agrees(graph, ds, PIPELINE, "CANCELED", None, "Flink job j2").passed, "run-new still open"
    node.run_states, node.latest_state = {"run-old": "COMPLETED", "run-new": "ABORTED"}, "ABORTED"
    assert run_state_agrees(graph, ds, PIPELINE, "CANCELED", None, "Flink job j2").passed, "nothing open, nothing runs"


def test_the_latest_run_that_names_datasets_sets_a_jobs_edges():
    later = reference_event("orders-s3-sink", "RUNNING", "96", minute=5)
    later["inputs"] = [{"namespace": "kafka://127.0.0.1:9092", "name": "orders-v2"}]
    graph = whole_pipeline(later)
    assert graph.upstream(ARCHIVE) == {("kafka://127.0.0.1:9092", "orders-v2")}


def test_an_undeclared_name_sharing_the_current_version_in_marquez_is_a_second_identity():
    """Marquez lists each symlink name as a dataset with the same current version: the Flink listener's table
    names did this to Kafka topics. A declared symlink (the catalog name of an Iceberg table) is fine."""
    from lineage_assets.checks.graph import DatasetNode

    graph = whole_pipeline()
    for identity, node in graph.datasets.items():
        node.version = f"v-{identity[1]}"
    alias = (KAFKA, "default_catalog.default_database.supplier_stats_sink")
    graph.datasets[alias] = DatasetNode(alias, version="v-supplier-stats")
    catalog = (CATALOG, "default.orders")
    graph.datasets[catalog] = DatasetNode(catalog, version="v-default/orders")

    finding = no_second_identity(graph, PIPELINE.dataset("kafka_supplier_stats"))
    assert not finding.passed and "default_catalog.default_database.supplier_stats_sink" in finding.message
    assert no_second_identity(graph, PIPELINE.dataset("iceberg_orders")).passed


def test_explain_tells_marquez_only_from_queued_from_never_sent():
    from lineage_assets.checks.compare import Finding, explain

    bad, good = Finding(False, "schema differs"), Finding(True, "ok")
    assert explain(good, bad, bad, 0, 0).passed
    assert "Marquez holds something else" in explain(bad, good, good, 0, 0).message
    queued = explain(bad, bad, good, 3, 42.0)
    assert "3 event(s) wait" in queued.message and "42 s" in queued.message
    assert "never sent" in explain(bad, bad, bad, 0, 0).message


def orders_event_with(change) -> dict:
    """The CDC connector's event (the producer of Kafka orders) with its output schema changed by ``change``."""
    event = reference_event("orders-source", "RUNNING", "77", minute=9)
    change(event["outputs"][0]["facets"]["schema"]["fields"])
    return event


def test_a_column_read_downstream_that_is_gone_or_retyped_upstream_fails_the_readers():
    archive, stats = PIPELINE.dataset("archive_orders"), PIPELINE.dataset("kafka_supplier_stats")
    dropped = whole_pipeline(
        orders_event_with(lambda fields: fields.remove(next(f for f in fields if f["name"] == "price")))
    )
    for ds in (archive, stats):
        finding = upstream_schema_holds(dropped, ds, PIPELINE)
        assert not finding.passed and not finding.warning, finding.message
        assert finding.details["gone"] == {"orders": ["price"]}, finding.details

    def narrow(fields):
        next(f for f in fields if f["name"] == "price")["type"] = "int"

    finding = upstream_schema_holds(whole_pipeline(orders_event_with(narrow)), stats, PIPELINE)
    assert not finding.passed and "orders.price" in finding.details["changed"], finding.details


def test_a_field_the_upstream_gained_only_warns():
    graph = whole_pipeline(orders_event_with(lambda fields: fields.append({"name": "coupon", "type": "string"})))
    finding = upstream_schema_holds(graph, PIPELINE.dataset("iceberg_orders"), PIPELINE)
    assert not finding.passed and finding.warning
    assert finding.details["gained"] == {"orders": ["coupon"]} and "coupon" in finding.message
    assert upstream_schema_holds(graph, PIPELINE.dataset("source_orders"), PIPELINE).passed, "no upstream"


def test_before_the_source_has_the_optional_currency_every_comparison_still_passes():
    """The pipeline as every emitter reports it before `ALTER TABLE ... ADD COLUMN currency`: the source, the topic
    and the archive without currency, the Iceberg table (which has it from its deploy) with it."""
    graph = LineageGraph.from_events(whole_pipeline_events(currency=False))
    assert "currency" not in graph.datasets[ORDERS].fields
    for key in ("kafka_orders", "archive_orders", "iceberg_orders"):
        ds = PIPELINE.dataset(key)
        assert schema_matches(graph, ds).passed, schema_matches(graph, ds).message
        assert upstream_schema_holds(graph, ds, PIPELINE).passed, upstream_schema_holds(graph, ds, PIPELINE).message
    assert "not at the source yet: ['currency']" in schema_matches(graph, PIPELINE.dataset("kafka_orders")).message


def test_a_required_column_is_still_missing_when_an_optional_one_may_be():
    event = reference_event("orders-source", "RUNNING", "78", minute=9)
    fields = event["outputs"][0]["facets"]["schema"]["fields"]
    fields[:] = [f for f in fields if f["name"] not in ("currency", "item")]
    finding = schema_matches(whole_pipeline(event), PIPELINE.dataset("kafka_orders"))
    assert not finding.passed and finding.details["missing"] == ["item"], finding.details


# --- exact values (issue 28: each branch's whole Finding, pinning the mutants of run_state_agrees) ----------------
def _flink_graph(runs: dict[str, str] | None, latest: tuple[str, str] | None = None) -> LineageGraph:
    graph = whole_pipeline()
    key = (PIPELINE.job("iceberg-ingestion").namespace, "iceberg-ingestion")
    if runs is None:
        del graph.jobs[key]
        return graph
    node = graph.jobs[key]
    node.run_states = runs
    node.latest_run, node.latest_state = latest or (None, None)
    return graph


def test_run_state_findings_word_for_word():
    ds = PIPELINE.dataset("iceberg_orders")
    fix_open = (
        "Turn the job's sensor on (it opens a run for the running job on its next tick), or see `lineage-lab lineage "
        "outbox` if the opening is still queued"
    )
    fix_close = (
        "Turn the job's sensor on (it closes the run on its next tick), or see `lineage-lab lineage outbox` if the "
        "close is still queued"
    )

    def details(engine, engine_run, latest_run, open_runs):
        return {"engine": engine, "engine_run": engine_run, "latest_run": latest_run, "open_runs": open_runs}

    source = PIPELINE.dataset("source_orders")
    assert run_state_agrees(whole_pipeline(), source, PIPELINE, "RUNNING") == Finding(
        True, "orders-generator is not a lineage job (nothing to compare)"
    )
    assert run_state_agrees(_flink_graph(None), ds, PIPELINE, None) == Finding(
        True, "no engine state for iceberg-ingestion (not asked); lineage says None"
    )
    graph = _flink_graph({"r1": "RUNNING"}, ("r1", "RUNNING"))
    assert run_state_agrees(graph, ds, PIPELINE, None, engine_what="Flink down") == Finding(
        True, "no engine state for iceberg-ingestion (Flink down); lineage says RUNNING"
    )
    # stopped engine
    assert run_state_agrees(graph, ds, PIPELINE, "canceled", engine_what="Flink job j1") == Finding(
        False,
        "stale lineage, job stopped: iceberg-ingestion (Flink job j1) is canceled but run r1 is RUNNING in the "
        f"lineage graph: the run was never closed. {fix_close}",
        details("canceled", None, "r1", ["r1"]),
    )
    latest_only = _flink_graph({}, ("r2", "RUNNING"))  # no run states kept, only the latest
    assert run_state_agrees(latest_only, ds, PIPELINE, "FAILED") == Finding(
        False,
        "stale lineage, job stopped: iceberg-ingestion is FAILED but run r2 is RUNNING in the lineage graph: the run "
        f"was never closed. {fix_close}",
        details("FAILED", None, "r2", []),
    )
    two = _flink_graph({"r1": "RUNNING", "r3": "NEW"}, ("r3", "NEW"))
    assert run_state_agrees(two, ds, PIPELINE, "STOPPED").message.startswith(
        "stale lineage, job stopped: iceberg-ingestion is STOPPED but run r1, r3 is RUNNING"
    )
    closed = _flink_graph({"r1": "COMPLETED"}, ("r1", "COMPLETED"))
    assert run_state_agrees(closed, ds, PIPELINE, "FINISHED") == Finding(
        True, "engine FINISHED, lineage COMPLETED (run r1)", details("FINISHED", None, "r1", [])
    )
    assert run_state_agrees(_flink_graph(None), ds, PIPELINE, "FINISHED") == Finding(
        True, "engine FINISHED, lineage None (run None)", details("FINISHED", None, None, [])
    )
    # running engine
    assert run_state_agrees(closed, ds, PIPELINE, "RUNNING") == Finding(
        False,
        "stale lineage, job running: the engine runs iceberg-ingestion (RUNNING) but its run r1 is COMPLETED. "
        + fix_open,
        details("RUNNING", None, "r1", []),
    )
    assert run_state_agrees(_flink_graph(None), ds, PIPELINE, "RUNNING", "r9", "Flink job j9") == Finding(
        False,
        "stale lineage, job running: the engine runs iceberg-ingestion (Flink job j9) (RUNNING) but its run r9 is "
        f"not in the lineage graph. {fix_open}",
        details("RUNNING", "r9", None, []),
    )
    assert run_state_agrees(_flink_graph({}), ds, PIPELINE, "RUNNING") == Finding(
        True, "engine RUNNING, lineage RUNNING (run None)", details("RUNNING", None, None, [])
    ), "no run yet: nothing stale"
    runless = _flink_graph({}, (None, "COMPLETED"))  # a latest state without a run: no run to judge
    assert run_state_agrees(runless, ds, PIPELINE, "RUNNING") == Finding(
        True, "engine RUNNING, lineage RUNNING (run None)", details("RUNNING", None, None, [])
    )
    new = _flink_graph({"r1": "COMPLETED", "r4": "NEW"}, ("r1", "COMPLETED"))
    assert run_state_agrees(new, ds, PIPELINE, "RUNNING", "r4") == Finding(
        True, "engine RUNNING, lineage RUNNING (run r4)", details("RUNNING", "r4", "r1", ["r4"])
    )
    starting = _flink_graph({"r5": "NEW"}, ("r5", "NEW"))
    assert run_state_agrees(starting, ds, PIPELINE, "RUNNING").passed
    both = _flink_graph({"r1": "RUNNING", "r3": "RUNNING", "r4": "RUNNING"}, ("r4", "RUNNING"))
    assert run_state_agrees(both, ds, PIPELINE, "RUNNING", "r4", "Flink job j4") == Finding(
        False,
        "stale lineage, two open runs: the engine runs iceberg-ingestion (Flink job j4) as run r4, but run r1, r3 is "
        "also RUNNING in the lineage graph, for a job that no longer runs. Turn the job's sensor on (it closes every "
        "open run but the current one on its next tick)",
        details("RUNNING", "r4", "r4", ["r1", "r3", "r4"]),
    )
