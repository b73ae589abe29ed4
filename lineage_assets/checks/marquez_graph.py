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
symlink facet names our data. Datasets and jobs that touch nothing of ours are never read. The GETs of each stage go
``WORKERS`` at a time (they do not depend on each other).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from lineage_assets.checks.graph import DatasetNode, Identity, JobNode, LineageGraph
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.lineage.naming import physical_key

#: Marquez's job types -> OpenLineage processing types
PROCESSING = {"STREAM": "STREAMING", "BATCH": "BATCH", "SERVICE": "SERVICE"}
#: the newest runs of each streaming job read for check (d)
RUNS = 100
#: hits of one name search (Marquez returns the most recently updated first); more same-named datasets than this
#: anywhere in Marquez would let an old second spelling go unseen
SEARCH_LIMIT = 200
#: requests in flight at once: the read is some 60 small GETs, one after the other they took 2-3 s on a busy host
WORKERS = 4


def from_marquez(client: MarquezClient, pipeline: Pipeline) -> LineageGraph:
    graph = LineageGraph()
    declared = list(pipeline.datasets.values())
    with ThreadPoolExecutor(WORKERS) as pool:
        for raw in pool.map(lambda ds: client.dataset(ds.namespace, ds.name), declared):
            if raw:
                _add_dataset(graph, raw)
        symlinks = sorted({s for node in list(graph.datasets.values()) for s in node.symlinks} - graph.datasets.keys())
        for raw in pool.map(lambda identity: client.dataset(*identity), symlinks):
            if raw:
                _add_dataset(graph, raw)

        present = [ds for ds in declared if (ds.namespace, ds.name) in graph.datasets]
        around = pool.map(lambda ds: client.lineage(ds.node_id, depth=1), present)
        columns = pool.map(lambda ds: client.column_lineage(ds.node_id, depth=1), present)
        for nodes in around:
            for raw in nodes:
                data = raw.get("data") or {}
                if raw["type"] == "JOB" and data:
                    _add_job(graph, data)
                elif raw["type"] == "DATASET" and data and _identity(data["id"]) not in graph.datasets:
                    node = DatasetNode(_identity(data["id"]))
                    node.fields = _fields(data)
                    graph.datasets[node.identity] = node
        for ds, nodes in zip(present, columns, strict=True):
            _add_column_sources(graph.datasets[(ds.namespace, ds.name)], ds.namespace, ds.name, nodes)

        unreached = [job for job in pipeline.jobs.values() if (job.namespace, job.name) not in graph.jobs]
        for raw in pool.map(lambda job: client.job(job.namespace, job.name), unreached):
            if raw:
                _add_job(graph, raw)
        streaming = [
            (job, node)
            for job in pipeline.jobs.values()
            if job.processing_type == "STREAMING" and (node := graph.jobs.get((job.namespace, job.name))) is not None
        ]
        runs = pool.map(lambda pair: client.runs(pair[0].namespace, pair[0].name, limit=RUNS), streaming)
        for (_, node), raws in zip(streaming, runs, strict=True):  # which runs of a long-running job are open (d)
            node.run_states = {r["id"]: r.get("state", "") for r in raws}

        _add_other_spellings(client, graph, pipeline, pool)
    return graph


def _add_column_sources(node: DatasetNode, namespace: str, name: str, nodes: list[dict]) -> None:
    for raw in nodes:
        data = raw.get("data") or {}
        if (data.get("namespace"), data.get("dataset")) != (namespace, name):
            continue
        sources = {((f["namespace"], f["dataset"]), f["field"]) for f in data.get("inputFields") or []}
        if sources:
            node.column_sources[data["field"]] = sources


def _add_other_spellings(
    client: MarquezClient, graph: LineageGraph, pipeline: Pipeline, pool: ThreadPoolExecutor
) -> None:
    """Datasets anywhere in Marquez that name a declared dataset's (or its symlink's) physical data another way."""
    ours = {physical_key(ds.namespace, ds.name) for ds in pipeline.datasets.values()}
    ours |= {physical_key(s.namespace, s.name) for ds in pipeline.datasets.values() for s in ds.symlinks}
    names = sorted({name for _, name in ours})
    pages = pool.map(lambda name: client.search(name, "DATASET", SEARCH_LIMIT), names)
    found = sorted(
        {
            identity
            for page in pages
            for hit in page
            if (identity := (hit["namespace"], hit["name"])) not in graph.datasets and physical_key(*identity) in ours
        }
    )
    for identity, raw in zip(found, pool.map(lambda identity: client.dataset(*identity), found), strict=True):
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
