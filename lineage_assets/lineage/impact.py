"""What a change to a dataset or one of its columns would touch downstream, read from Marquez.

``lineage-lab impact DATASET[.COLUMN]`` names the target the way people do (a dataset's name, its identity key,
its Dagster asset key or its catalog name, optionally followed by a column); the identity module resolves it.
Downstream datasets and jobs come from Marquez's lineage API, downstream columns from its column-lineage API (the
fields whose inputs lead back to the target), and each dataset is mapped back to its Dagster asset. Nothing here
reads the declared graph: the answer is what Marquez holds, so an edge Marquez lacks is missing here too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from lineage_assets.lineage.identity import Dataset, Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient

Identity = tuple[str, str]  # (namespace, name)
FieldRef = tuple[str, str, str]  # (namespace, dataset name, column)


class UnknownTarget(ValueError):
    """The target names no declared dataset or column; the message lists what it could have meant."""


@dataclass(frozen=True)
class Target:
    dataset: Dataset
    column: str | None = None

    def __str__(self) -> str:
        return f"{self.dataset.name}{'.' + self.column if self.column else ''} ({self.dataset.namespace})"


@dataclass
class Impact:
    target: Target
    datasets: list[Identity] = field(default_factory=list)
    columns: list[FieldRef] = field(default_factory=list)
    jobs: list[Identity] = field(default_factory=list)

    def assets(self, pipeline: Pipeline) -> list[str]:
        """The Dagster asset keys of the downstream datasets (those the identity module declares)."""
        found = (pipeline.by_identity(ns, name) for ns, name in self.datasets)
        return sorted({"/".join(ds.asset_key) for ds in found if ds is not None})

    def text(self, pipeline: Pipeline) -> str:
        def asset_of(ns: str, name: str) -> str:
            ds = pipeline.by_identity(ns, name)
            return "/".join(ds.asset_key) if ds else "(not a Dagster asset)"

        lines = [f"IMPACT of a change to {self.target}, as Marquez's lineage shows it", ""]
        lines.append(f"DATASETS downstream ({len(self.datasets)})")
        lines += [f"  {name:<36} {ns:<32} asset {asset_of(ns, name)}" for ns, name in self.datasets]
        if self.target.column:
            lines += ["", f"COLUMNS derived from {self.target.column} ({len(self.columns)})"]
            lines += [f"  {name}.{column:<24} {ns:<32} asset {asset_of(ns, name)}" for ns, name, column in self.columns]
        lines += ["", f"JOBS downstream ({len(self.jobs)})"]
        lines += [f"  {name:<36} {ns}" for ns, name in self.jobs]
        return "\n".join(lines)


def resolve(pipeline: Pipeline, text: str) -> Target:
    """The dataset (and column) ``text`` names: exactly one declared dataset must match."""
    direct = _datasets_named(pipeline, text)
    if len(direct) == 1:
        return Target(direct[0])
    if not direct and "." in text:
        head, _, column = text.rpartition(".")
        owners = _datasets_named(pipeline, head)
        if len(owners) == 1:
            if column in owners[0].column_names:
                return Target(owners[0], column)
            raise UnknownTarget(
                f"{owners[0].name} has no column {column!r}; its columns: {', '.join(owners[0].column_names)}"
            )
        direct = owners
    if len(direct) > 1:
        listed = ", ".join(f"{ds.key} ({ds.namespace}/{ds.name})" for ds in direct)
        raise UnknownTarget(f"{text!r} names more than one dataset: {listed}; use one of their keys")
    known = ", ".join(sorted(f"{ds.name} [{ds.key}]" for ds in pipeline.datasets.values()))
    raise UnknownTarget(f"no dataset is called {text!r}: give a name or key of {known}, optionally .COLUMN")


def _datasets_named(pipeline: Pipeline, text: str) -> list[Dataset]:
    def names(ds: Dataset) -> set[str]:
        return {ds.key, ds.name, ds.node_id, "/".join(ds.asset_key), *(s.name for s in ds.symlinks)}

    return [ds for ds in pipeline.datasets.values() if text in names(ds)]


def downstream_columns(graph: Iterable[dict], start: FieldRef) -> list[FieldRef]:
    """Every field of Marquez's column-lineage graph whose inputs lead back to ``start``, nearest first."""
    derived: dict[FieldRef, set[FieldRef]] = {}
    for node in graph:
        data = node.get("data") or {}
        if node.get("type") != "DATASET_FIELD" or not data:
            continue
        out = (data["namespace"], data["dataset"], data["field"])
        for f in data.get("inputFields") or []:
            derived.setdefault((f["namespace"], f["dataset"], f["field"]), set()).add(out)
    return _walk(start, lambda ref: derived.get(ref, set()))


def downstream_nodes(graph: Iterable[dict], start: str) -> list[str]:
    """Every node of Marquez's lineage graph reachable from ``start`` along its out-edges, nearest first."""
    edges = {node["id"]: {e["destination"] for e in node.get("outEdges") or []} for node in graph}
    return _walk(start, lambda node_id: edges.get(node_id, set()))


def _walk(start, nexts) -> list:
    seen, order, queue = {start}, [], deque([start])
    while queue:
        for nxt in sorted(nexts(queue.popleft())):
            if nxt not in seen:
                seen.add(nxt)
                order.append(nxt)
                queue.append(nxt)
    return order


def impact(client: MarquezClient, target: Target, depth: int = 20) -> Impact:
    """What Marquez says lies downstream of ``target`` (raises MarquezError when Marquez cannot be read)."""
    ds = target.dataset
    result = Impact(target)
    graph = {node["id"]: node for node in client.lineage(ds.node_id, depth=depth)}
    for node_id in downstream_nodes(graph.values(), ds.node_id):
        node = graph.get(node_id) or {}
        data = node.get("data") or {}
        identity = (data.get("namespace", ""), data.get("name", node_id))
        (result.datasets if node.get("type") == "DATASET" else result.jobs).append(identity)
    if target.column:
        start = (ds.namespace, ds.name, target.column)
        field_id = f"datasetField:{ds.namespace}:{ds.name}:{target.column}"
        result.columns = downstream_columns(client.column_lineage(field_id, depth=depth, downstream=True), start)
    return result
