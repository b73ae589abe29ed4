"""The Spark listener's events as they go to Marquez: named under the Dagster job so Marquez keeps one job per
name, and a failed application's COMPLETE corrected to FAIL."""

import json

from lineage_assets.lineage.identity import DAGSTER_JOB, SPARK_SUPPLIER_STATS_JOB
from lineage_assets.lineage.outbox import LineageEmitter
from lineage_assets.spark.lineage import forward_events, qualify_under_parent

DAGSTER_RUN = "0195c1c0-0000-7000-8000-0000000000aa"
APP_RUN = "0195c1c0-0000-7000-8000-0000000000bb"


def listener_events() -> list[dict]:
    """What the OpenLineage Spark listener writes for app `supplier_stats` run with parentJobName=dagster."""

    def ev(kind, job, run, parent_job, parent_run, second):
        return {
            "eventType": kind,
            "eventTime": f"2025-05-01T10:00:{second:02d}.000Z",
            "job": {"namespace": "lineage-lab", "name": job},
            "run": {
                "runId": run,
                "facets": {
                    "parent": {
                        "run": {"runId": parent_run},
                        "job": {"namespace": "lineage-lab", "name": parent_job},
                        "root": {"run": {"runId": DAGSTER_RUN}, "job": {"namespace": "lineage-lab", "name": "dagster"}},
                    }
                },
            },
            "inputs": [],
            "outputs": [],
        }

    action = "0195c1c0-0000-7000-8000-0000000000cc"
    return [
        ev("START", "supplier_stats", APP_RUN, "dagster", DAGSTER_RUN, 1),
        ev("START", "supplier_stats.overwrite_by_expression.t", action, "supplier_stats", APP_RUN, 2),
        ev("COMPLETE", "supplier_stats.overwrite_by_expression.t", action, "supplier_stats", APP_RUN, 3),
        ev("COMPLETE", "supplier_stats", APP_RUN, "dagster", DAGSTER_RUN, 4),
    ]


def test_the_applications_jobs_are_named_under_the_dagster_job():
    out = qualify_under_parent(listener_events(), DAGSTER_JOB)
    assert [e["job"]["name"] for e in out] == [
        SPARK_SUPPLIER_STATS_JOB,
        f"{SPARK_SUPPLIER_STATS_JOB}.overwrite_by_expression.t",
        f"{SPARK_SUPPLIER_STATS_JOB}.overwrite_by_expression.t",
        SPARK_SUPPLIER_STATS_JOB,
    ]
    parents = [e["run"]["facets"]["parent"]["job"]["name"] for e in out]
    assert parents == [DAGSTER_JOB, SPARK_SUPPLIER_STATS_JOB, SPARK_SUPPLIER_STATS_JOB, DAGSTER_JOB]
    # every job name starts with its parent's name and a dot: Marquez keeps it as sent
    for e in out:
        assert e["job"]["name"].startswith(e["run"]["facets"]["parent"]["job"]["name"] + ".")
    assert listener_events()[0]["job"]["name"] == "supplier_stats", "the input is not changed in place"


def test_a_failed_application_ends_in_fail_under_its_qualified_name(tmp_path):
    path = tmp_path / "events.ndjson"
    path.write_text("\n".join(json.dumps(e) for e in listener_events()) + "\n")
    emitter = LineageEmitter(tmp_path / "outbox.sqlite", "http://127.0.0.1:9")
    queued = forward_events(path, emitter, SPARK_SUPPLIER_STATS_JOB, DAGSTER_JOB, RuntimeError("disk full"))
    ends = {e["job"]["name"]: e["eventType"] for e in queued if e["eventType"] in ("COMPLETE", "FAIL")}
    assert ends == {SPARK_SUPPLIER_STATS_JOB: "FAIL", f"{SPARK_SUPPLIER_STATS_JOB}.overwrite_by_expression.t": "FAIL"}
    assert emitter.outbox.counts().queued == 4


def test_an_action_whose_parent_the_listener_called_unknown_goes_back_under_the_application(tmp_path):
    events = listener_events()
    events[0]["job"]["name"] = "unknown"  # as the listener wrote a second application's START in one process
    for action in events[1:3]:
        action["run"]["facets"]["parent"]["job"]["name"] = "unknown"
    path = tmp_path / "events.ndjson"
    path.write_text("\n".join(json.dumps(e) for e in events))
    emitter = LineageEmitter(tmp_path / "outbox.sqlite", "http://127.0.0.1:9")
    queued = forward_events(path, emitter, SPARK_SUPPLIER_STATS_JOB, DAGSTER_JOB)
    parents = {e["run"]["facets"]["parent"]["job"]["name"] for e in queued}
    assert parents == {DAGSTER_JOB, SPARK_SUPPLIER_STATS_JOB}
    assert queued[0]["job"]["name"] == SPARK_SUPPLIER_STATS_JOB


def test_an_unknown_parent_of_another_run_is_left_as_it_is():
    events = listener_events()
    parent = events[2]["run"]["facets"]["parent"]
    parent["job"]["name"], parent["run"]["runId"] = "unknown", "0195c1c0-0000-7000-8000-0000000000ff"
    from lineage_assets.spark.lineage import attach_actions_to_application

    assert attach_actions_to_application(events, "supplier_stats")[2]["run"]["facets"]["parent"]["job"]["name"] == (
        "unknown"
    )
