import datetime as dt

from infra.settings import StackSettings
from lineage_assets.flink.runs import close_run
from lineage_assets.lineage.events import EventBuilder
from lineage_assets.lineage.identity import Pipeline

BUILDER = EventBuilder(Pipeline.from_settings(StackSettings()))
NOW = dt.datetime(2025, 5, 1, tzinfo=dt.UTC)
RUN = "0195c1c0-0000-7000-8000-000000000009"


def test_each_way_of_stopping_ends_the_same_run():
    expected = {"CANCELED": "ABORT", "FAILED": "FAIL", "FINISHED": "COMPLETE", "GONE": "ABORT"}
    for state, ending in expected.items():
        event = close_run("iceberg-ingestion", RUN, state, BUILDER, NOW)
        assert (event.eventType.value, event.run.runId) == (ending, RUN)
        assert event.job.facets["jobType"].processingType == "STREAMING"
        assert [o.name for o in event.outputs] == ["default/orders", "orders-dlq-flink"]


def test_running_jobs_are_left_open():
    for state in ("RUNNING", "RESTARTING", "CREATED", "INITIALIZING"):
        assert close_run("iceberg-ingestion", RUN, state, BUILDER, NOW) is None


def test_a_failure_carries_flinks_root_exception():
    cause = ("java.lang.RuntimeException: boom", "java.lang.RuntimeException: boom\\n\\tat x.y(Z.java:1)")
    event = close_run("iceberg-ingestion", RUN, "FAILED", BUILDER, NOW, cause)
    error = event.run.facets["errorMessage"]
    assert (error.message, error.stackTrace) == cause
