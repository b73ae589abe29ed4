"""At most one active Flink job per name: the verdict over job lists written by hand."""

from lineage_assets.flink.client import FlinkError, FlinkJob
from lineage_assets.flink.runs_once import copies, runs_once_result

URL = "http://flink:8081"


def test_one_running_job_and_finished_ones_pass():
    jobs = [
        FlinkJob("old", "supplier-stats", "CANCELED", 1_000),
        FlinkJob("now", "supplier-stats", "RUNNING", 2_000),
        FlinkJob("other", "iceberg-ingestion", "RUNNING", 1_500),
    ]
    passed, text, active = copies(jobs, "supplier-stats", URL)
    assert passed and active == ["now"] and "now" in text


def test_no_job_of_the_name_passes():
    passed, _, active = copies([FlinkJob("x", "iceberg-ingestion", "RUNNING", 1)], "supplier-stats", URL)
    assert passed and active == []


def test_two_active_jobs_fail_naming_both_and_which_to_cancel():
    jobs = [
        FlinkJob("second", "supplier-stats", "RESTARTING", 1_765_000_002_000),
        FlinkJob("first", "supplier-stats", "RUNNING", 1_765_000_001_000),
    ]
    passed, text, active = copies(jobs, "supplier-stats", URL)
    assert not passed
    assert active == ["first", "second"]
    assert "2 Flink jobs named supplier-stats are active" in text
    assert "Keep the first (first)" in text and "flink cancel second" in text
    assert "second (RESTARTING, started 2025-12-06 05:46:42 UTC)" in text


def test_a_tie_in_start_time_is_broken_by_the_job_id():
    jobs = [FlinkJob("b", "j", "RUNNING", 5), FlinkJob("a", "j", "CREATED", 5)]
    assert copies(jobs, "j", URL)[2] == ["a", "b"]


class Unreachable:
    url = URL

    def jobs(self):
        raise FlinkError(f"Flink at {URL} is unreachable (ConnectionError); is the stack up?")


def test_a_cluster_that_does_not_answer_is_unknown_not_a_pass():
    result = runs_once_result(Unreachable(), "supplier-stats")  # type: ignore[arg-type]
    assert not result.passed
    assert result.severity.value == "WARN"
    assert "unknown" in result.description and "unreachable" in result.description
