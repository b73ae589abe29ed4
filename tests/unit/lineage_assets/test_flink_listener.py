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


def test_listener_datasets_become_the_declared_ones():
    """The listener names each Flink table as a symlink in the topic's namespace; Marquez would list it as a second
    dataset. Forwarded events carry the identity module's datasets instead, and keep the listener's run facets."""
    from infra.settings import StackSettings
    from lineage_assets.flink.listener import with_declared_datasets
    from lineage_assets.lineage.events import EventBuilder
    from lineage_assets.lineage.identity import Pipeline

    pipeline = Pipeline.from_settings(StackSettings())
    topic = pipeline.dataset("kafka_supplier_stats")
    table_alias = {"namespace": topic.namespace, "name": "default_catalog.default_database.supplier_stats_sink"}
    raw = {
        "eventType": "START",
        "eventTime": "2025-05-01T10:00:00.000Z",
        "run": {"runId": "0195c1c0-0000-7000-8000-000000000001", "facets": {"flink_job": {"jobId": "abc"}}},
        "job": {"namespace": "lineage-lab", "name": "supplier-stats", "facets": {}},
        "inputs": [{"namespace": topic.namespace, "name": "orders", "facets": {}}],
        "outputs": [
            {
                "namespace": topic.namespace,
                "name": topic.name,
                "facets": {"symlinks": {"identifiers": [{**table_alias, "type": "TABLE"}]}},
            }
        ],
    }
    out = with_declared_datasets(raw, EventBuilder(pipeline), "supplier-stats")
    names = json.dumps(out["inputs"] + out["outputs"])
    assert "default_catalog" not in names
    job = pipeline.job("supplier-stats")
    assert [(d["namespace"], d["name"]) for d in out["outputs"]] == [
        (pipeline.dataset(k).namespace, pipeline.dataset(k).name) for k in job.outputs
    ]
    assert out["outputs"][0]["facets"]["schema"]["fields"][0]["name"] == "window_start"
    assert out["run"] == raw["run"] and out["eventTime"] == raw["eventTime"]
    assert out["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
