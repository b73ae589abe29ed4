import datetime as dt
import json

import pytest
from openlineage.client.event_v2 import RunState

from infra.settings import StackSettings
from lineage_assets.lineage.events import Engine, EventBuilder, ParentRun, is_terminal, run_id_for, to_json
from lineage_assets.lineage.identity import Pipeline

T0 = dt.datetime(2025, 5, 1, 10, 0, tzinfo=dt.UTC)


@pytest.fixture
def builder() -> EventBuilder:
    return EventBuilder(Pipeline.from_settings(StackSettings()))


def as_dict(event) -> dict:
    return json.loads(to_json(event))


def test_every_event_carries_job_type_and_full_datasets(builder):
    for state in (RunState.START, RunState.RUNNING, RunState.COMPLETE, RunState.ABORT):
        ev = as_dict(builder.event("iceberg-ingestion", state, "0195c1c0-0000-7000-8000-000000000001", event_time=T0))
        assert ev["eventType"] == state.value
        assert ev["job"] == {
            "namespace": "lineage-lab",
            "name": "iceberg-ingestion",
            "facets": {"jobType": ev["job"]["facets"]["jobType"]},
        }
        job_type = ev["job"]["facets"]["jobType"]
        assert (job_type["processingType"], job_type["integration"], job_type["jobType"]) == (
            "STREAMING",
            "FLINK",
            "JOB",
        )
        assert [(i["namespace"], i["name"]) for i in ev["inputs"]] == [("kafka://127.0.0.1:9092", "orders")]
        assert [(o["namespace"], o["name"]) for o in ev["outputs"]] == [
            ("s3://warehouse", "default/orders"),
            ("kafka://127.0.0.1:9092", "orders-dlq-flink"),
        ]


def test_output_carries_schema_symlink_datasource_and_column_lineage(builder):
    ev = as_dict(builder.event("iceberg-ingestion", RunState.RUNNING, "0195c1c0-0000-7000-8000-000000000001"))
    out = ev["outputs"][0]["facets"]
    assert [(f["name"], f["type"]) for f in out["schema"]["fields"]] == [
        ("order_id", "string"),
        ("item", "string"),
        ("price", "decimal(10,2)"),
        ("supplier", "string"),
        ("bid_time", "timestamp_ntz"),
        ("currency", "string"),
    ]
    assert out["symlinks"]["identifiers"] == [
        {"namespace": "http://127.0.0.1:8181", "name": "default.orders", "type": "TABLE"}
    ]
    assert out["dataSource"] == {
        "_producer": out["dataSource"]["_producer"],
        "_schemaURL": out["dataSource"]["_schemaURL"],
        "name": "s3://warehouse",
        "uri": "s3://warehouse",
    }
    price = out["columnLineage"]["fields"]["price"]
    assert price["inputFields"][0]["namespace"] == "kafka://127.0.0.1:9092"
    assert price["inputFields"][0]["name"] == "orders"
    assert price["inputFields"][0]["field"] == "price"
    assert price["inputFields"][0]["transformations"][0]["type"] == "DIRECT"
    assert price["inputFields"][0]["transformations"][0]["subtype"] == "TRANSFORMATION"
    assert price["transformationType"] == "DIRECT"
    # Marquez keeps column lineage only for columns of the same event's schema facet
    assert set(out["columnLineage"]["fields"]) <= {f["name"] for f in out["schema"]["fields"]}
    assert "schema" in ev["inputs"][0]["facets"], "Marquez needs the inputs' schemas to store column lineage"


def test_run_facets(builder):
    try:
        raise RuntimeError("checkpoint failed")
    except RuntimeError as exc:
        err = exc
    ev = as_dict(
        builder.event(
            "dagster.supplier_stats",
            RunState.FAIL,
            "0195c1c0-0000-7000-8000-000000000002",
            parent=ParentRun("0195c1c0-0000-7000-8000-0000000000aa", "dagster", "supplier_stats_job"),
            engine=Engine("spark", "3.5.7"),
            error=err,
            nominal_start=T0,
            nominal_end=T0 + dt.timedelta(days=1),
        )
    )
    facets = ev["run"]["facets"]
    assert facets["parent"]["run"]["runId"] == "0195c1c0-0000-7000-8000-0000000000aa"
    assert (facets["parent"]["job"]["namespace"], facets["parent"]["job"]["name"]) == ("dagster", "supplier_stats_job")
    assert facets["processing_engine"]["name"] == "spark"
    assert facets["errorMessage"]["message"] == "RuntimeError: checkpoint failed"
    assert "raise RuntimeError" in facets["errorMessage"]["stackTrace"]
    assert facets["nominalTime"]["nominalStartTime"] == "2025-05-01T10:00:00.000Z"
    ev = as_dict(
        builder.event(
            "orders-s3-sink",
            RunState.FAIL,
            "0195c1c0-0000-7000-8000-000000000003",
            error=("DataException: bad record", "org.apache...\n\tat ..."),
        )
    )
    assert ev["run"]["facets"]["errorMessage"]["programmingLanguage"] == "JAVA"


def test_run_ids_are_stable_for_the_same_run_and_distinct_otherwise():
    a = run_id_for("supplier-stats", T0, "flink-job-1")
    assert a == run_id_for("supplier-stats", T0, "flink-job-1")
    assert a != run_id_for("supplier-stats", T0, "flink-job-2")
    assert a != run_id_for("iceberg-ingestion", T0, "flink-job-1")


def test_terminal_states():
    assert [s.value for s in RunState if is_terminal(s)] == ["COMPLETE", "ABORT", "FAIL"]


def test_naive_times_are_refused(builder):
    with pytest.raises(ValueError, match="timezone-aware"):
        builder.event("supplier-stats", RunState.START, "x", event_time=dt.datetime(2025, 1, 1))


def test_the_deploying_dagster_run_is_a_custom_facet_not_a_parent(builder):
    from lineage_assets.lineage.events import DagsterRun

    ev = as_dict(
        builder.event(
            "iceberg-ingestion",
            RunState.START,
            "0195c1c0-0000-7000-8000-000000000004",
            dagster_run=DagsterRun("d1b2", "__ASSET_JOB", "iceberg/default/orders"),
        )
    )
    facets = ev["run"]["facets"]
    assert "parent" not in facets
    assert {k: facets["dagster_run"][k] for k in ("runId", "jobName", "assetKey")} == {
        "runId": "d1b2",
        "jobName": "__ASSET_JOB",
        "assetKey": "iceberg/default/orders",
    }
    assert facets["dagster_run"]["_schemaURL"].endswith("DagsterRunFacet.json")
