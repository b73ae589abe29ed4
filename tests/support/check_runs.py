"""Runs of the stack's streaming checks job, launched by a test as the checks schedule launches them (through the
stack's daemon), and waited for in the stack's Dagster instance."""

from __future__ import annotations

import time

import dagster as dg
from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES

from infra.services.dagster import CHECK_RUNS_TAG
from tests.support.stack_dagster import launch_run

#: the streaming checks job, written out by hand
CHECKS_JOB = "streaming_lineage_checks"
#: a check run already asked for ends well within this (a failure detector)
CHECK_RUN_END_S = 300


def wait_for_check_runs_to_end(instance: dg.DagsterInstance) -> None:
    """Until no run of the streaming checks job is queued or running."""
    deadline = time.monotonic() + CHECK_RUN_END_S
    while unfinished := instance.get_runs(
        filters=dg.RunsFilter(job_name=CHECKS_JOB, statuses=list(NOT_FINISHED_STATUSES)), limit=10
    ):
        assert time.monotonic() < deadline, f"check runs {[r.run_id for r in unfinished]} still in flight"
        time.sleep(2)


def run_the_checks_job(settings, instance: dg.DagsterInstance, requested_by: str | None = None) -> str:
    """Launches the checks job through the stack's daemon, as its schedule does, waits for the run to end and
    returns its id. ``requested_by`` tags it as the sensors tag theirs, so the instance runs it one at a time with
    theirs (its tag concurrency limit): two check runs at once would both take a period's cut."""
    run_id = launch_run(settings, CHECKS_JOB, {CHECK_RUNS_TAG: requested_by} if requested_by else None)
    deadline = time.monotonic() + CHECK_RUN_END_S
    while not (run := instance.get_run_by_id(run_id)) or not run.is_finished:
        assert time.monotonic() < deadline, f"the check run {run_id} did not end within {CHECK_RUN_END_S} s"
        time.sleep(2)
    assert run.status == dg.DagsterRunStatus.SUCCESS, f"the check run {run_id} ended {run.status.value}"
    return run_id
