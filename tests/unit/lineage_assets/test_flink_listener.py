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
