"""The lineage graph as Marquez holds it, read through its REST API.

Datasets (every namespace: fields, symlinks, column lineage, current version) come from the dataset listings, the
jobs and their edges from Marquez's lineage graph around each declared dataset (what its UI draws), each job's
latest run from the same graph, and the column edges of each declared dataset from the column-lineage API. Declared
jobs the lineage graph does not reach (the Dagster job, a job that lost its edges) are looked up one by one.
"""

from __future__ import annotations

from lineage_assets.checks.graph import DatasetNode, Identity, JobNode, LineageGraph
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez import MarquezClient

#: Marquez's job types -> OpenLineage processing types
PROCESSING = {"STREAM": "STREAMING", "BATCH": "BATCH", "SERVICE": "SERVICE"}
#: the newest runs of each streaming job read for check (d)
RUNS = 100


def from_marquez(client: MarquezClient, pipeline: Pipeline) -> LineageGraph:
    graph = LineageGraph()
    for namespace in client.namespaces():
        for raw in client.datasets(namespace):
            node = DatasetNode((raw["namespace"], raw["name"]))
            node.fields = {f["name"]: f.get("type") or "" for f in raw.get("fields") or []}
            symlinks = ((raw.get("facets") or {}).get("symlinks") or {}).get("identifiers") or []
            node.symlinks = {(s["namespace"], s["name"]) for s in symlinks}
            node.version = raw.get("currentVersion")
            graph.datasets[node.identity] = node

    reached: set[str] = set()
    for ds in pipeline.datasets.values():
        if ds.node_id in reached or (ds.namespace, ds.name) not in graph.datasets:
            continue
        for raw in client.lineage(ds.node_id):
            reached.add(raw["id"])
            if raw["type"] == "JOB" and raw.get("data"):
                _add_job(graph, raw["data"])
    for job in pipeline.jobs.values():
        if (job.namespace, job.name) not in graph.jobs and (raw := client.job(job.namespace, job.name)):
            _add_job(graph, raw)
    for job in pipeline.jobs.values():  # which runs of a long-running job are open (check d)
        node = graph.jobs.get((job.namespace, job.name))
        if node is not None and job.processing_type == "STREAMING":
            node.run_states = {r["id"]: r.get("state", "") for r in client.runs(job.namespace, job.name, limit=RUNS)}

    for ds in pipeline.datasets.values():
        node = graph.datasets.get((ds.namespace, ds.name))
        if node is None:
            continue
        for raw in client.column_lineage(ds.node_id, depth=1):
            data = raw.get("data") or {}
            if (data.get("namespace"), data.get("dataset")) != (ds.namespace, ds.name):
                continue
            sources = {((f["namespace"], f["dataset"]), f["field"]) for f in data.get("inputFields") or []}
            if sources:
                node.column_sources[data["field"]] = sources
    return graph


def _identity(ref: dict) -> Identity:
    return ref["namespace"], ref["name"]


def _add_job(graph: LineageGraph, data: dict) -> None:
    identity = _identity(data["id"])
    latest = data.get("latestRun") or {}
    node = JobNode(
        identity,
        inputs={_identity(i) for i in data.get("inputs") or []},
        outputs={_identity(o) for o in data.get("outputs") or []},
        latest_run=latest.get("id"),
        latest_state=latest.get("state"),
        latest_time=latest.get("updatedAt") or "",
        processing_type=PROCESSING.get(data.get("type") or "", data.get("type")),
        parent=(identity[0], data["parentJobName"]) if data.get("parentJobName") else None,
    )
    graph.jobs[identity] = node
