"""The pipeline's part of the lineage graph as Marquez holds it, read through its REST API.

The read is proportional to OUR graph, not to Marquez: a shared Marquez holds other teams' lineage too, and listing
every namespace's datasets (what this module did first) made every check slower with each team that joined. So it
asks only about the pipeline's own nodes and what touches them:

- each declared dataset (fields, symlinks, current version), and each symlink name it carries (Marquez lists a
  symlink name as a dataset of its own, sharing the version: check (e) needs to see it);
- the jobs that read or write a declared dataset, from Marquez's lineage graph one hop around it (depth 1: the
  pipeline's jobs, Spark's child jobs, and any other team's job that reads or writes our data, with the datasets
  those jobs touch); declared jobs it does not reach (the Dagster job, a job that lost its edges) one by one;
- the newest runs of each streaming job (check d), and the column edges into each declared dataset (depth 1);
- datasets anywhere whose name matches a declared one (Marquez's search), kept when they name the same physical
  data under another spelling (check e: ``kafka://localhost:9092`` for ``kafka://127.0.0.1:9092``).

What it does not see, by design: a dataset with an unrelated name, that no job next to ours reads or writes, whose
symlink facet names our data. Datasets and jobs that touch nothing of ours are never read.
"""

from __future__ import annotations

from lineage_assets.checks.graph import DatasetNode, Identity, JobNode, LineageGraph
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez import MarquezClient
from lineage_assets.lineage.naming import physical_key

#: Marquez's job types -> OpenLineage processing types
PROCESSING = {"STREAM": "STREAMING", "BATCH": "BATCH", "SERVICE": "SERVICE"}
#: the newest runs of each streaming job read for check (d)
RUNS = 100
#: hits of one name search (Marquez returns the most recently updated first); more same-named datasets than this
#: anywhere in Marquez would let an old second spelling go unseen
SEARCH_LIMIT = 200


def from_marquez(client: MarquezClient, pipeline: Pipeline) -> LineageGraph:
    graph = LineageGraph()
    declared = list(pipeline.datasets.values())
    for ds in declared:
        if raw := client.dataset(ds.namespace, ds.name):
            _add_dataset(graph, raw)
    for identity in {s for node in list(graph.datasets.values()) for s in node.symlinks} - graph.datasets.keys():
        if raw := client.dataset(*identity):
            _add_dataset(graph, raw)

    for ds in declared:
        if (ds.namespace, ds.name) not in graph.datasets:
            continue
        for raw in client.lineage(ds.node_id, depth=1):
            data = raw.get("data") or {}
            if raw["type"] == "JOB" and data:
                _add_job(graph, data)
            elif raw["type"] == "DATASET" and data and _identity(data["id"]) not in graph.datasets:
                node = DatasetNode(_identity(data["id"]))
                node.fields = _fields(data)
                graph.datasets[node.identity] = node
    for job in pipeline.jobs.values():
        if (job.namespace, job.name) not in graph.jobs and (raw := client.job(job.namespace, job.name)):
            _add_job(graph, raw)
    for job in pipeline.jobs.values():  # which runs of a long-running job are open (check d)
        node = graph.jobs.get((job.namespace, job.name))
        if node is not None and job.processing_type == "STREAMING":
            node.run_states = {r["id"]: r.get("state", "") for r in client.runs(job.namespace, job.name, limit=RUNS)}

    for ds in declared:
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

    _add_other_spellings(client, graph, pipeline)
    return graph


def _add_other_spellings(client: MarquezClient, graph: LineageGraph, pipeline: Pipeline) -> None:
    """Datasets anywhere in Marquez that name a declared dataset's (or its symlink's) physical data another way."""
    ours = {physical_key(ds.namespace, ds.name) for ds in pipeline.datasets.values()}
    ours |= {physical_key(s.namespace, s.name) for ds in pipeline.datasets.values() for s in ds.symlinks}
    names = sorted({name for _, name in ours})
    for name in names:
        # MarquezClient has no search method (lineage/marquez.py is not this module's to change): its GET
        page = client._get("search", q=name, filter="DATASET", limit=SEARCH_LIMIT) or {}
        for hit in page.get("results") or []:
            identity = (hit["namespace"], hit["name"])
            if identity not in graph.datasets and physical_key(*identity) in ours:
                raw = client.dataset(*identity)
                if raw:
                    _add_dataset(graph, raw)
                else:
                    graph.datasets[identity] = DatasetNode(identity)


def _identity(ref: dict) -> Identity:
    return ref["namespace"], ref["name"]


def _fields(raw: dict) -> dict[str, str]:
    return {f["name"]: f.get("type") or "" for f in raw.get("fields") or []}


def _add_dataset(graph: LineageGraph, raw: dict) -> None:
    node = DatasetNode((raw["namespace"], raw["name"]))
    node.fields = _fields(raw)
    symlinks = ((raw.get("facets") or {}).get("symlinks") or {}).get("identifiers") or []
    node.symlinks = {(s["namespace"], s["name"]) for s in symlinks}
    node.version = raw.get("currentVersion")
    graph.datasets[node.identity] = node


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
