"""The six comparisons between an asset (as the identity module declares it) and the lineage graph. Pure
functions: each returns a Finding that says what differs and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass, field

from lineage_assets.checks.graph import Identity, LineageGraph
from lineage_assets.lineage.identity import Dataset, Pipeline
from lineage_assets.lineage.naming import physical_key

#: spellings of one type across engines (Spark says integer/long, Flink STRING, the identity module int/bigint)
TYPE_ALIASES = {
    "integer": "int",
    "int32": "int",
    "long": "bigint",
    "int64": "bigint",
    "varchar": "string",
    "text": "string",
}


def canonical_type(name: str) -> str:
    lowered = name.strip().lower().replace(" ", "")
    return TYPE_ALIASES.get(lowered, lowered)


#: engine states (Flink job states, Connect connector states) in which a streaming run has ended
ENGINE_STOPPED = {"CANCELED", "FAILED", "FINISHED", "GONE", "PAUSED", "STOPPED", "DELETED", "UNASSIGNED"}


@dataclass(frozen=True)
class Finding:
    passed: bool
    message: str
    details: dict[str, object] = field(default_factory=dict)
    #: a failure that only warns (the asset still works, someone should look)
    warning: bool = False


def _name(identity: Identity) -> str:
    return f"{identity[0]}/{identity[1]}"


def dataset_exists(graph: LineageGraph, ds: Dataset) -> Finding:
    """(a) the dataset is in the graph under the identity the identity module gives."""
    if (ds.namespace, ds.name) in graph.datasets:
        return Finding(True, f"{ds.node_id} is in the lineage graph")
    return Finding(
        False,
        f"the lineage graph has no dataset {_name((ds.namespace, ds.name))}: its producer `{ds.producer}` has not "
        f"reported it yet; materialize the asset (or turn its sensor on) and let the outbox drain",
    )


def schema_matches(graph: LineageGraph, ds: Dataset) -> Finding:
    """(b) field names and types in the graph equal the asset's column schema; an optional column (one the source
    adds later) may be absent."""
    node = graph.datasets.get((ds.namespace, ds.name))
    if node is None or not node.fields:
        return Finding(False, f"no schema for {_name((ds.namespace, ds.name))} in the lineage graph; see check (a)")
    declared = {c.name: c.type for c in ds.columns}
    not_yet = sorted(c.name for c in ds.columns if c.optional and c.name not in node.fields)
    missing = sorted(set(declared) - set(node.fields) - set(not_yet))
    extra = sorted(set(node.fields) - set(declared))
    types = {
        c: (declared[c], node.fields[c])
        for c in declared
        if c in node.fields and canonical_type(declared[c]) != canonical_type(node.fields[c])
    }
    if not (missing or extra or types):
        later = f" (optional, not at the source yet: {not_yet})" if not_yet else ""
        return Finding(True, f"{len(declared) - len(not_yet)} fields match{later}")
    return Finding(
        False,
        f"schema of {ds.name} differs: missing in lineage {missing}, not declared {extra}, type (declared, lineage) "
        f"{types}; fix the producer's schema facet or the column schema in lineage_assets/lineage/identity.py",
        {"missing": missing, "extra": extra, "types": types},
    )


def upstream_matches(graph: LineageGraph, ds: Dataset, pipeline: Pipeline) -> Finding:
    """(c) the dataset's upstream edges in the graph equal its Dagster dependencies."""
    expected = {(pipeline.dataset(k).namespace, pipeline.dataset(k).name) for k in pipeline.upstream(ds.key)}
    actual = graph.upstream((ds.namespace, ds.name))
    missing, extra = sorted(expected - actual), sorted(actual - expected)
    if not (missing or extra):
        return Finding(True, f"{len(expected)} upstream edge(s) match")
    return Finding(
        False,
        f"upstream edges of {ds.name} differ: missing {[_name(i) for i in missing]}, extra "
        f"{[_name(i) for i in extra]}; an extra edge usually means a producer names a dataset differently "
        "(see check (e)), a missing one that its job has not reported its inputs",
        {"missing": [_name(i) for i in missing], "extra": [_name(i) for i in extra]},
    )


def run_state_agrees(
    graph: LineageGraph,
    ds: Dataset,
    pipeline: Pipeline,
    engine_state: str | None,
    engine_run: str | None = None,
    engine_what: str = "",
) -> Finding:
    """(d) the producing job's runs in the lineage graph agree with the engine, asked when the check runs: while
    the engine runs the job, its run (``engine_run`` when known, else the latest run) is open and no other is;
    while it does not, no run is open."""
    job = pipeline.jobs.get(ds.producer)
    if job is None:
        return Finding(True, f"{ds.producer} is not a lineage job (nothing to compare)")
    node = graph.jobs.get((job.namespace, job.name))
    lineage_state = node.latest_state if node else None
    latest_run = node.latest_run if node else None
    open_runs = sorted(node.open_runs) if node else []
    if engine_state is None:
        return Finding(
            True, f"no engine state for {job.name} ({engine_what or 'not asked'}); lineage says {lineage_state}"
        )
    what = f"{job.name} ({engine_what})" if engine_what else job.name
    details = {"engine": engine_state, "engine_run": engine_run, "latest_run": latest_run, "open_runs": open_runs}
    stopped = engine_state.upper() in ENGINE_STOPPED
    if stopped:
        still_open = open_runs or ([latest_run] if lineage_state == "RUNNING" else [])
        if still_open:
            return Finding(
                False,
                f"stale lineage, job stopped: {what} is {engine_state} but run {', '.join(still_open)} is RUNNING in "
                "the lineage graph: the run was never closed. Turn the job's sensor on (it closes the run on its "
                "next tick), or see `lineage-lab lineage outbox` if the close is still queued",
                details,
            )
        return Finding(True, f"engine {engine_state}, lineage {lineage_state} (run {latest_run})", details)
    mine = engine_run if engine_run else latest_run
    state = (node.run_states.get(mine) if node and engine_run else lineage_state) if mine else None
    if state not in ("RUNNING", "NEW", None) or (engine_run and state is None):
        return Finding(
            False,
            f"stale lineage, job running: the engine runs {what} ({engine_state}) but its run "
            f"{mine} is {state or 'not in the lineage graph'}. Turn the job's sensor on (it opens a run "
            "for the running job on its next tick), or see `lineage-lab lineage outbox` if the opening is still "
            "queued",
            details,
        )
    others = [r for r in open_runs if r != mine]
    if others:
        return Finding(
            False,
            f"stale lineage, two open runs: the engine runs {what} as run {mine}, but run {', '.join(others)} is also "
            "RUNNING in the lineage graph, for a job that no longer runs. Turn the job's sensor on (it closes every "
            "open run but the current one on its next tick)",
            details,
        )
    return Finding(True, f"engine {engine_state}, lineage RUNNING (run {mine})", details)


def no_second_identity(graph: LineageGraph, ds: Dataset) -> Finding:
    """(e) no other dataset in the graph names the same data: the same physical address spelled differently, a
    dataset that names it as its symlink, or (in Marquez) an undeclared symlink name sharing its current version.
    The symlinks the identity module declares (an Iceberg table's catalog name) are the one allowed alias, as long
    as no job reads or writes the data under that name (Marquez lists symlink names as datasets of their own)."""
    mine = (ds.namespace, ds.name)
    same = {physical_key(*mine)} | {physical_key(s.namespace, s.name) for s in ds.symlinks}
    used = {i for job in graph.jobs.values() for i in job.inputs | job.outputs}
    aliases = {(s.namespace, s.name) for s in ds.symlinks} - used
    version = graph.datasets[mine].version if mine in graph.datasets else None
    others = sorted(
        identity
        for identity, node in graph.datasets.items()
        if identity != mine
        and identity not in aliases
        and (
            physical_key(*identity) in same
            or any(physical_key(*s) in same for s in node.symlinks)
            or (version is not None and node.version == version)
        )
    )
    if not others:
        return Finding(True, f"one identity for {ds.name}" + (f" (aliases {sorted(aliases)})" if aliases else ""))
    return Finding(
        False,
        f"{_name(mine)} is also named {[_name(o) for o in others]} in the lineage graph: a producer names it by "
        "hand or adds a symlink the identity module does not declare; make it ask lineage_assets/lineage/identity.py "
        "(or normalise with naming.py)",
        {"identity": _name(mine), "others": [_name(o) for o in others]},
    )


def upstream_schema_holds(graph: LineageGraph, ds: Dataset, pipeline: Pipeline) -> Finding:
    """(f) each upstream's current version in the graph still has the columns this asset reads from it, with the
    declared types (fails otherwise; an optional column may be absent: the producer writes null until the source has
    it); a field the upstream gained that the identity module does not declare only warns: this asset does not
    carry it yet."""
    job = pipeline.jobs.get(ds.producer)
    reads: dict[str, set[str]] = {}
    for sources in (job.column_lineage.get(ds.key, {}) if job else {}).values():
        for src in sources:
            reads.setdefault(src.dataset, set()).add(src.column)
    upstream = pipeline.upstream(ds.key)
    if not upstream:
        return Finding(True, f"{ds.name} has no upstream dataset")
    gone, changed, gained = {}, {}, {}
    for key in upstream:
        up = pipeline.dataset(key)
        node = graph.datasets.get((up.namespace, up.name))
        if node is None or not node.fields:
            gone[up.name] = sorted(reads.get(key, set())) or ["(its whole schema)"]
            continue
        for column in sorted(reads.get(key, set())):
            if column not in node.fields:
                if up.column(column).optional:
                    continue
                gone.setdefault(up.name, []).append(column)
            elif canonical_type(node.fields[column]) != canonical_type(up.column(column).type):
                changed[f"{up.name}.{column}"] = (up.column(column).type, node.fields[column])
        new = sorted(set(node.fields) - set(up.column_names))
        if new:
            gained[up.name] = new
    details = {"gone": gone, "changed": changed, "gained": gained}
    if gone or changed:
        return Finding(
            False,
            f"{ds.name} reads columns its upstream no longer has as declared: gone {gone}, type changed (declared, "
            f"lineage) {changed}; its producer `{ds.producer}` will fail or drop data: change the upstream back, "
            "or change the producer and its columns in lineage_assets/lineage/identity.py first",
            details,
        )
    if gained:
        return Finding(
            False,
            f"upstream gained fields {gained} that {ds.name} does not carry: declare them in "
            "lineage_assets/lineage/identity.py (and in the producer) if they should flow on",
            details,
            warning=True,
        )
    return Finding(True, f"the columns {ds.name} reads from {len(upstream)} upstream dataset(s) are as declared")


def explain(on_marquez: Finding, as_sent: Finding, with_queued: Finding, queued: int, backlog_age: float) -> Finding:
    """A failed comparison with Marquez, told apart by replaying the project's own events: Marquez holds something
    other than what was sent, the events are still queued, or the project never sent it right."""
    if on_marquez.passed:
        return on_marquez
    if as_sent.passed:
        why = (
            "sent, but Marquez holds something else: the events this project delivered agree with the declaration, "
            "so another producer or an edit changed Marquez (or Marquez lost data)"
        )
    elif with_queued.passed:
        why = (
            f"not delivered yet: {queued} event(s) wait in the lineage outbox, the oldest for {backlog_age:.0f} s; "
            "is the lineage-drainer service running and Marquez up (`lineage-lab lineage outbox`)?"
        )
    else:
        why = "never sent: the project's own events show the same, so fix the producer (Marquez is not at fault)"
    details = {**on_marquez.details, "explanation": why}
    return Finding(False, f"{on_marquez.message} [{why}]", details, warning=on_marquez.warning)
