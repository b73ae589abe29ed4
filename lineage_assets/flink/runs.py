"""Flink jobs -> OpenLineage runs: one run per Flink job id, whoever started the job.

The run id is derived from the job's identity and the Flink job (its id and start time), so a deployment from any
Dagster instance, the job sensor of any instance and the `stack down` suspension all name the same run for the same
Flink job without asking each other. A run opens (START, RUNNING) while its job runs and is closed once when the
job stops: CANCELED -> ABORT, FAILED -> FAIL with Flink's root exception, FINISHED -> COMPLETE; a job the cluster no
longer knows, or a cluster that is gone, -> ABORT.
"""

from __future__ import annotations

import datetime as dt

from openlineage.client.event_v2 import RunEvent, RunState

from lineage_assets.flink.client import FlinkJob
from lineage_assets.lineage.account import Account
from lineage_assets.lineage.events import Engine, EventBuilder, FlinkDeploymentRunFacet, run_id_for
from lineage_assets.lineage.identity import Job

ENGINE = Engine("flink", "2.0.0")
ENDINGS = {"CANCELED": RunState.ABORT, "FAILED": RunState.FAIL, "FINISHED": RunState.COMPLETE, "GONE": RunState.ABORT}
FOUND_RUNNING = "found running (started outside this Dagster instance)"


def started_at(flink_job: FlinkJob) -> dt.datetime:
    return dt.datetime.fromtimestamp(flink_job.start_time_ms / 1000, dt.UTC)


def flink_run_id(job: Job, jid: str, start_time_ms: int) -> str:
    """The OpenLineage run of Flink job ``jid`` as pipeline job ``job`` (its namespace is part of it: the same
    Flink job seen by a pipeline in another namespace is another OpenLineage job, so another run)."""
    started = dt.datetime.fromtimestamp(start_time_ms / 1000, dt.UTC)
    return run_id_for(f"{job.namespace}/{job.name}", started, jid)


def deployment_facets(jid: str, version: str | None, started_by: str) -> dict:
    return {"flink_deployment": FlinkDeploymentRunFacet(jobId=jid, version=version or "unknown", startedBy=started_by)}


def open_events(
    job: str,
    run_id: str,
    flink_job: FlinkJob,
    version: str | None,
    started_by: str,
    builder: EventBuilder,
    **kwargs,
) -> list[RunEvent]:
    """START (at the Flink job's start) and RUNNING (now) of a running job's run, with every dataset facet a
    deployment sends and the Flink job in the ``flink_deployment`` run facet."""
    facets = deployment_facets(flink_job.jid, version, started_by)
    return [
        builder.event(
            job, RunState.START, run_id, event_time=started_at(flink_job), engine=ENGINE, run_facets=facets, **kwargs
        ),
        builder.event(job, RunState.RUNNING, run_id, engine=ENGINE, run_facets=facets, **kwargs),
    ]


def close_run(
    job: str,
    run_id: str,
    state: str,
    builder: EventBuilder,
    now: dt.datetime,
    cause: tuple[str, str] | None = None,
    account: Account | None = None,
) -> RunEvent | None:
    """The terminal event for a job observed in ``state`` (``GONE`` when it vanished); None while it is alive."""
    ending = ENDINGS.get(state)
    if ending is None:
        return None
    error = cause or (f"{job}: Flink job {state.lower()}", "") if ending == RunState.FAIL else None
    return builder.event(job, ending, run_id, event_time=now, engine=ENGINE, error=error, account=account)
