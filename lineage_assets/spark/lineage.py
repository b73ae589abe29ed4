"""Deliver the Spark listener's events through the lineage outbox, correcting what the listener gets wrong.

- Names: Marquez files a job whose run has a parent under ``<parent job>.<job>`` (and then cannot find the parent
  of the application's action jobs, which name the application by its own name: a second, split job). The listener
  cannot spell a '.' in a job name (it normalises the application name), so the application's jobs are qualified
  under the Dagster job here: ``supplier_stats`` becomes ``dagster.supplier_stats``, its actions
  ``dagster.supplier_stats.<action>``, and the parent facets follow. Marquez then keeps every name as sent.
- Unresolved names: when a second application starts in one Python process (a test materializing several days),
  the listener may name the application's START ``unknown``, and its actions' parent job too, although the run id
  is the application's (its COMPLETE has the right name); those are named after the application again.
- Failures: the listener reports COMPLETE for an application whose job failed (OpenLineage issue 4350). When the
  Dagster step failed, the application's COMPLETE, and the COMPLETE of the action that was running last, become
  FAIL (same run id, so Marquez sees one run end in FAIL) with the error attached.
- Statistics: the listener's ``inputStatistics`` are what the scan planned (every record of the files it opened,
  rows deleted by delete files included), not the rows the job read. The run that carries the job's edges (the
  action whose COMPLETE reads the input and writes the output; the application's own events carry no datasets, and
  giving them some would add a second pair of edges to the graph) gets the job's own figures instead: the rows it
  read at the snapshot it read, the rows it wrote and the bytes its commit added.
"""

from __future__ import annotations

import copy
import json
import traceback
from dataclasses import dataclass
from pathlib import Path

from openlineage.client.generated.input_statistics_input_dataset import InputStatisticsInputDatasetFacet
from openlineage.client.generated.output_statistics_output_dataset import OutputStatisticsOutputDatasetFacet
from openlineage.client.serde import Serde

from lineage_assets.lineage.outbox import LineageEmitter


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: the job name the listener writes when it could not resolve the application's name
UNRESOLVED = "unknown"


def attach_actions_to_application(events: list[dict], app_name: str) -> list[dict]:
    """The application's run named after the application in every event (the listener may call it ``unknown`` in
    its START), and actions whose parent is that run put back under it."""
    app_runs = {e["run"]["runId"] for e in events if e["job"]["name"] == app_name}
    out = []
    for event in events:
        parent = ((event.get("run") or {}).get("facets") or {}).get("parent") or {}
        own = event["run"]["runId"] in app_runs and event["job"]["name"] == UNRESOLVED
        orphan = (parent.get("run") or {}).get("runId") in app_runs and (parent.get("job") or {}).get("name") == (
            UNRESOLVED
        )
        if own or orphan:
            event = copy.deepcopy(event)
            if own:
                event["job"]["name"] = app_name
            if orphan:
                event["run"]["facets"]["parent"]["job"]["name"] = app_name
        out.append(event)
    return out


def qualify_under_parent(events: list[dict], parent_job: str) -> list[dict]:
    """Every job of the application named ``<parent_job>.<name>``, and parent facets naming them likewise."""
    prefix = parent_job + "."

    def qualified(name: str) -> str:
        return name if name == parent_job or name.startswith(prefix) else prefix + name

    out = []
    for event in events:
        event = copy.deepcopy(event)
        event["job"]["name"] = qualified(event["job"]["name"])
        parent = ((event.get("run") or {}).get("facets") or {}).get("parent")
        if parent and parent.get("job"):
            parent["job"]["name"] = qualified(parent["job"]["name"])
        out.append(event)
    return out


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


@dataclass(frozen=True)
class RunStatistics:
    """What one run read from its input and wrote to its output, as the job counted them (None: not known)."""

    input: tuple[str, str]  # (namespace, name) of the input dataset
    output: tuple[str, str]
    input_rows: int | None
    input_bytes: int | None
    output_rows: int | None
    output_bytes: int | None


def _reads_and_writes(event: dict, stats: RunStatistics) -> bool:
    def names(kind: str) -> set[tuple[str, str]]:
        return {(d.get("namespace"), d.get("name")) for d in event.get(kind) or []}

    return stats.input in names("inputs") and stats.output in names("outputs")


def add_statistics(events: list[dict], stats: RunStatistics) -> list[dict]:
    """The COMPLETE of each run that read ``stats.input`` and wrote ``stats.output`` carries ``inputStatistics``
    and ``outputStatistics`` with the job's figures (openlineage-python's facets), replacing the listener's."""
    in_facet = Serde.to_dict(InputStatisticsInputDatasetFacet(rowCount=stats.input_rows, size=stats.input_bytes))
    out_facet = Serde.to_dict(OutputStatisticsOutputDatasetFacet(rowCount=stats.output_rows, size=stats.output_bytes))
    out = []
    for event in events:
        if event.get("eventType") == "COMPLETE" and _reads_and_writes(event, stats):
            event = copy.deepcopy(event)
            for dataset in event["inputs"]:
                if (dataset.get("namespace"), dataset.get("name")) == stats.input:
                    dataset["inputFacets"] = {**(dataset.get("inputFacets") or {}), "inputStatistics": in_facet}
            for dataset in event["outputs"]:
                if (dataset.get("namespace"), dataset.get("name")) == stats.output:
                    dataset["outputFacets"] = {**(dataset.get("outputFacets") or {}), "outputStatistics": out_facet}
        out.append(event)
    return out


def forward_events(
    path: Path,
    emitter: LineageEmitter,
    app_job: str,
    parent_job: str,
    error: BaseException | None = None,
    statistics: RunStatistics | None = None,
) -> list[dict]:
    """Queue the listener's events, named under ``parent_job`` (and corrected when ``error`` is given, given the
    job's own figures when ``statistics`` is); returns what was queued. ``app_job`` is the application's job as
    the identity module names it."""
    app_name = app_job.removeprefix(parent_job + ".")
    events = qualify_under_parent(attach_actions_to_application(read_events(path), app_name), parent_job)
    if error is not None:
        events = correct_failed_run(events, app_job, error)
    elif statistics is not None:
        events = add_statistics(events, statistics)
    for event in events:
        emitter.emit(event)
    return events
