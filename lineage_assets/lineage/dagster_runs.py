"""A Dagster run as an OpenLineage run of the identity module's ``dagster`` job (run id = Dagster run id): the
parent of the batch work a Dagster step launches, under one stable job name whichever Dagster job ran it.

The step opens the parent run before it launches the child and closes it when it ends (COMPLETE, FAIL with the
error, ABORT when the Dagster run was cancelled), so Marquez never keeps it RUNNING for good. Its START carries the
run's start time, so a second step of the same Dagster run re-sends it as a duplicate the outbox drops."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from lineage_assets.lineage.events import DagsterRun, EventBuilder, ParentRun, RunState
from lineage_assets.lineage.identity import DAGSTER_JOB, Pipeline
from lineage_assets.lineage.outbox import LineageEmitter


def _started(context: dg.AssetExecutionContext) -> dt.datetime:
    record = context.instance.get_run_record_by_id(context.run.run_id)
    start = record.start_time if record else None
    return dt.datetime.fromtimestamp(start, dt.UTC) if start else dt.datetime.now(dt.UTC)


def _nominal_day(context: dg.AssetExecutionContext) -> tuple[dt.datetime, dt.datetime] | None:
    """A daily partition's day as the run's nominal time (what a backfill of that day means)."""
    if not context.has_partition_key:
        return None
    try:
        day = dt.datetime.strptime(context.partition_key, "%Y-%m-%d").replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    return day, day + dt.timedelta(days=1)


@contextmanager
def dagster_parent_run(
    context: dg.AssetExecutionContext, pipeline: Pipeline, emitter: LineageEmitter
) -> Iterator[ParentRun]:
    """Open the Dagster run's OpenLineage run for the duration of the block; yields the parent for child runs."""
    job = pipeline.job(DAGSTER_JOB)
    builder = EventBuilder(pipeline)
    run_id = context.run.run_id
    options: dict = {"dagster_run": DagsterRun(run_id, context.job_name, context.asset_key.to_user_string())}
    nominal = _nominal_day(context)
    if nominal:
        options["nominal_start"], options["nominal_end"] = nominal

    def emit(state: RunState, **kwargs) -> None:
        emitter.emit(builder.event(job.name, state, run_id, **options, **kwargs))

    emit(RunState.START, event_time=_started(context))
    try:
        yield ParentRun(run_id, job.namespace, job.name)
    except dg.DagsterExecutionInterruptedError:
        emit(RunState.ABORT)
        raise
    except BaseException as exc:
        emit(RunState.FAIL, error=exc)
        raise
    emit(RunState.COMPLETE)
