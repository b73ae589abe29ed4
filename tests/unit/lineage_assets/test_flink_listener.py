"""Reading the OpenLineage Flink listener's file: only the submitted job's events, only those after the mark."""

import json

from lineage_assets.flink.listener import ListenerLog


def event(jid: str, kind: str = "START") -> str:
    return json.dumps({"eventType": kind, "run": {"runId": f"r-{jid}", "facets": {"flink_job": {"jobId": jid}}}})


def test_events_of_the_job_after_the_mark(tmp_path):
    log = ListenerLog(tmp_path / "listener.jsonl")
    assert log.mark() == 0 and log.events_for("a") == []
    log.path.write_text(event("a") + "\n")
    mark = log.mark()
    with log.path.open("a") as f:
        f.write(event("b") + "\n" + event("a", "RUNNING") + "\n" + '{"half a li')
    found = log.events_for("a", since=mark)
    assert [(e["eventType"], e["run"]["runId"]) for e in found] == [("RUNNING", "r-a")]
    assert [e["eventType"] for e in log.events_for("a")] == ["START", "RUNNING"]
    assert log.events_for("c", since=mark, wait_seconds=0.6) == []


def test_a_forwarded_event_carries_the_jobs_account_and_keeps_the_listeners_run():
    """The listener names each Flink table as a symlink in the topic's namespace; Marquez would list it as a second
    dataset. Forwarded events carry the job's account instead (here a shadow topic the engine reported), and keep
    the listener's run facets and time."""
    from infra.settings import StackSettings
    from lineage_assets.flink.listener import as_accounted
    from lineage_assets.lineage.account import Account, DatasetName
    from lineage_assets.lineage.events import EventBuilder
    from lineage_assets.lineage.identity import Pipeline

    pipeline = Pipeline.from_settings(StackSettings())
    table_alias = {
        "namespace": "kafka://127.0.0.1:9092",
        "name": "default_catalog.default_database.supplier_stats_sink",
    }
    raw = {
        "eventType": "START",
        "eventTime": "2025-05-01T10:00:00.000Z",
        "run": {"runId": "0195c1c0-0000-7000-8000-000000000001", "facets": {"flink_job": {"jobId": "abc"}}},
        "job": {"namespace": "lineage-lab", "name": "supplier-stats", "facets": {}},
        "inputs": [{"namespace": "kafka://127.0.0.1:9092", "name": "orders", "facets": {}}],
        "outputs": [
            {
                "namespace": "kafka://127.0.0.1:9092",
                "name": "supplier-stats-shadow",
                "facets": {"symlinks": {"identifiers": [{**table_alias, "type": "TABLE"}]}},
            }
        ],
    }
    account = Account(
        "supplier-stats",
        "the listener",
        (DatasetName("kafka://127.0.0.1:9092", "orders"),),
        (DatasetName("kafka://127.0.0.1:9092", "supplier-stats-shadow"),),
    )
    out = as_accounted(raw, EventBuilder(pipeline), "supplier-stats", account)
    assert "default_catalog" not in json.dumps(out["inputs"] + out["outputs"])
    assert [(d["namespace"], d["name"]) for d in out["outputs"]] == [
        ("kafka://127.0.0.1:9092", "supplier-stats-shadow")
    ]
    assert out["outputs"][0]["facets"]["lineageOrigin"]["reader"] == "the listener"
    assert out["inputs"][0]["facets"]["schema"]["fields"][0]["name"] == "supplier", "a declared input keeps its schema"
    assert out["run"] == raw["run"] and out["eventTime"] == raw["eventTime"]
    assert out["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
