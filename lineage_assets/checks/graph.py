"""The lineage graph the checks compare with: datasets (fields, symlinks, column lineage, current version), jobs
(inputs, outputs, latest run and its state, processing type, parent job).

It is filled from what Marquez holds (``marquez_graph.from_marquez``); ``LineageGraph.from_events`` rebuilds the
same graph from OpenLineage events the way Marquez builds its own (latest schema, a job's edges from its latest run
that named datasets, the state of whichever event came last), which is how the checks explain a difference: the
events the project sent say one thing and Marquez holds another, or the project never sent it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

Identity = tuple[str, str]  # (namespace, name)
RUN_STATES = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED"}
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "ABORTED"})


@dataclass
class DatasetNode:
    identity: Identity
    fields: dict[str, str] = field(default_factory=dict)  # name -> type, latest schema facet
    symlinks: set[Identity] = field(default_factory=set)
    #: output column -> the (dataset, column) pairs it is computed from
    column_sources: dict[str, set[tuple[Identity, str]]] = field(default_factory=dict)
    #: Marquez's current version id: a symlink name shares it with its dataset (None when rebuilt from events)
    version: str | None = None


@dataclass
class JobNode:
    identity: Identity
    inputs: set[Identity] = field(default_factory=set)
    outputs: set[Identity] = field(default_factory=set)
    latest_run: str | None = None
    latest_state: str | None = None
    latest_time: str = ""
    processing_type: str | None = None
    parent: Identity | None = None  # the job of the parent run (Spark: the application's job)
    #: run id -> its state (RUNNING, COMPLETED ...), for the newest runs of the job: which ones are open
    run_states: dict[str, str] = field(default_factory=dict)

    @property
    def open_runs(self) -> set[str]:
        return {run for run, state in self.run_states.items() if state in ("RUNNING", "NEW")}


@dataclass
class LineageGraph:
    datasets: dict[Identity, DatasetNode] = field(default_factory=dict)
    jobs: dict[Identity, JobNode] = field(default_factory=dict)

    @classmethod
    def from_events(cls, events: Iterable[dict]) -> LineageGraph:
        graph = cls()
        io_run: dict[Identity, str] = {}  # job -> the run its current inputs/outputs come from
        for event in sorted(events, key=lambda e: e.get("eventTime", "")):
            job_id = (event["job"]["namespace"], event["job"]["name"])
            job = graph.jobs.setdefault(job_id, JobNode(job_id))
            run_id = event["run"]["runId"]
            if event.get("eventType") in RUN_STATES and job.run_states.get(run_id) not in TERMINAL_STATES:
                job.run_states[run_id] = RUN_STATES[event["eventType"]]  # a closed run stays closed, as in Marquez
            if event.get("eventTime", "") >= job.latest_time:
                job.latest_run, job.latest_time = run_id, event.get("eventTime", "")
                job.latest_state = RUN_STATES.get(event.get("eventType", ""), job.latest_state)
            parent = ((event["run"].get("facets") or {}).get("parent") or {}).get("job")
            if parent:
                job.parent = (parent["namespace"], parent["name"])
            job_type = (event["job"].get("facets") or {}).get("jobType") or {}
            job.processing_type = job_type.get("processingType", job.processing_type)
            inputs = [graph._dataset(d) for d in event.get("inputs") or []]
            outputs = [graph._dataset(d) for d in event.get("outputs") or []]
            if inputs or outputs:
                if io_run.get(job_id) != run_id:  # a new run that names datasets replaces the job's edges
                    job.inputs, job.outputs, io_run[job_id] = set(), set(), run_id
                job.inputs |= {d.identity for d in inputs}
                job.outputs |= {d.identity for d in outputs}
        return graph

    def _dataset(self, raw: dict) -> DatasetNode:
        identity = (raw["namespace"], raw["name"])
        node = self.datasets.setdefault(identity, DatasetNode(identity))
        facets = raw.get("facets") or {}
        schema = (facets.get("schema") or {}).get("fields")
        if schema:
            node.fields = {f["name"]: f.get("type", "") for f in schema}
        for s in (facets.get("symlinks") or {}).get("identifiers") or []:
            node.symlinks.add((s["namespace"], s["name"]))
        for column, lineage in ((facets.get("columnLineage") or {}).get("fields") or {}).items():
            node.column_sources[column] = {
                ((f["namespace"], f["name"]), f["field"]) for f in lineage.get("inputFields") or []
            }
        return node

    def io_with_children(self, job: Identity) -> tuple[set[Identity], set[Identity]]:
        """A job's inputs and outputs including those of its child jobs (Marquez nests a Spark application's
        action jobs under it)."""
        node = self.jobs[job]
        children = [j for j in self.jobs.values() if j.parent == job]
        return (
            node.inputs.union(*(c.inputs for c in children)),
            node.outputs.union(*(c.outputs for c in children)),
        )

    def producers(self, dataset: Identity) -> list[JobNode]:
        return [j for j in self.jobs.values() if dataset in j.outputs]

    def upstream(self, dataset: Identity) -> set[Identity]:
        """Datasets read by the jobs that write ``dataset``: its upstream edges."""
        return {i for job in self.producers(dataset) for i in job.inputs}
