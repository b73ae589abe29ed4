"""Deliver the Spark listener's events through the lineage outbox, correcting what the listener gets wrong.

The OpenLineage Spark listener reports COMPLETE for an application whose job failed (OpenLineage issue 4350). When
the Dagster step failed, the application's COMPLETE, and the COMPLETE of the action that was running last, become
FAIL (same run id, so Marquez sees one run end in FAIL) with the error attached.
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path

from lineage_assets.lineage.outbox import LineageEmitter


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def correct_failed_run(events: list[dict], app_job: str, error: BaseException) -> list[dict]:
    """Turn the application's COMPLETE, and the last action's COMPLETE, into FAIL with the error."""
    terminal = [i for i, e in enumerate(events) if e.get("eventType") == "COMPLETE"]
    to_fail = {i for i in terminal if events[i]["job"]["name"] == app_job}
    actions = [i for i in terminal if i not in to_fail]
    if actions:
        to_fail.add(actions[-1])
    facet = {
        "_producer": "https://github.com/lineage-lab/lineage-lab",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
        "message": f"{type(error).__name__}: {error}",
        "programmingLanguage": "PYTHON",
        "stackTrace": "".join(traceback.format_exception(error)),
    }
    corrected = []
    for i, event in enumerate(events):
        if i in to_fail:
            event = {**event, "eventType": "FAIL"}
            event["run"] = {**event["run"], "facets": {**event["run"].get("facets", {}), "errorMessage": facet}}
        corrected.append(event)
    return corrected


def forward_events(path: Path, emitter: LineageEmitter, app_job: str, error: BaseException | None = None) -> list[dict]:
    """Queue the listener's events (corrected when ``error`` is given); returns what was queued."""
    events = read_events(path)
    if error is not None:
        events = correct_failed_run(events, app_job, error)
    for event in events:
        emitter.emit(event)
    return events
