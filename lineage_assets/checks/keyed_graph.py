"""The pipeline's part of a lineage graph with every node named by its identity-module key instead of its namespace.

Two deployments of the pipeline name the same dataset differently (Kafka ``orders`` is ``kafka://127.0.0.1:9092``
in the embedded stack and ``kafka://kafka:9092`` in the Compose deployment), but they hold the same lineage when
their keyed graphs are equal: the same declared datasets with the same fields, the same jobs with the same inputs,
outputs and processing type, and the same column lineage. Nodes the pipeline does not declare (other teams' jobs,
test leftovers), run states (which depend on when one looks) and the columns the identity module declares optional
(present once the source team has added them: a fact of the data, not of the deployment) are left out.
"""

from __future__ import annotations

from lineage_assets.checks.graph import LineageGraph
from lineage_assets.lineage.identity import Pipeline


def keyed_graph(pipeline: Pipeline, graph: LineageGraph) -> dict[str, dict]:
    """A JSON-ready dict: ``datasets`` key -> fields, ``jobs`` key -> edges and type, ``columns`` key.col -> sources."""
    dataset_key = {(d.namespace, d.name): key for key, d in pipeline.datasets.items()}
    job_key = {(j.namespace, j.name): key for key, j in pipeline.jobs.items()}
    optional = {(key, c.name) for key, d in pipeline.datasets.items() for c in d.columns if c.optional}
    datasets = {
        key: {field: kind for field, kind in sorted(node.fields.items()) if (key, field) not in optional}
        for identity, node in graph.datasets.items()
        if (key := dataset_key.get(identity))
    }
    jobs = {
        job_key[identity]: {
            "inputs": sorted(dataset_key[i] for i in node.inputs if i in dataset_key),
            "outputs": sorted(dataset_key[o] for o in node.outputs if o in dataset_key),
            "processing_type": node.processing_type,
            "parent": job_key.get(node.parent) if node.parent else None,
        }
        for identity, node in graph.jobs.items()
        if identity in job_key
    }
    columns: dict[str, list[str]] = {}
    for identity, node in graph.datasets.items():
        key = dataset_key.get(identity)
        for column, sources in node.column_sources.items() if key else ():
            read = sorted(
                f"{dataset_key[source]}.{field}"
                for source, field in sources
                if source in dataset_key and (dataset_key[source], field) not in optional
            )
            if read and (key, column) not in optional:  # an edge from an optional column only is optional too
                columns[f"{key}.{column}"] = read
    return {"datasets": dict(sorted(datasets.items())), "jobs": dict(sorted(jobs.items())), "columns": columns}


def differences(left: dict[str, dict], right: dict[str, dict]) -> list[str]:
    """Each way two keyed graphs differ, one line each (empty when they hold the same lineage)."""
    lines = []
    for part in ("datasets", "jobs", "columns"):
        a, b = left.get(part, {}), right.get(part, {})
        for key in sorted(a.keys() | b.keys()):
            if a.get(key) != b.get(key):
                lines.append(f"{part} {key}: {a.get(key, '(missing)')} != {b.get(key, '(missing)')}")
    return lines
