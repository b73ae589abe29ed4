"""Flink job state -> the end of its OpenLineage run: the loop the reference lab left open.

The run was opened at deployment (START/RUNNING, run id in the materialization). When the job leaves RUNNING the
sensor closes that same run: CANCELED -> ABORT, FAILED -> FAIL with Flink's root exception, FINISHED -> COMPLETE;
a job the cluster no longer knows, or a cluster that is gone, -> ABORT. Each run is closed once.
"""

from __future__ import annotations

import datetime as dt

from openlineage.client.event_v2 import RunEvent, RunState

from lineage_assets.lineage.events import Engine, EventBuilder

ENGINE = Engine("flink", "2.0.0")
ENDINGS = {"CANCELED": RunState.ABORT, "FAILED": RunState.FAIL, "FINISHED": RunState.COMPLETE, "GONE": RunState.ABORT}


def close_run(
    job: str,
    run_id: str,
    state: str,
    builder: EventBuilder,
    now: dt.datetime,
    cause: tuple[str, str] | None = None,
) -> RunEvent | None:
    """The terminal event for a job observed in ``state`` (``GONE`` when it vanished); None while it is alive."""
    ending = ENDINGS.get(state)
    if ending is None:
        return None
    error = cause or (f"{job}: Flink job {state.lower()}", "") if ending == RunState.FAIL else None
    return builder.event(job, ending, run_id, event_time=now, engine=ENGINE, error=error)
