"""Asset checks on every asset of the pipeline, comparing it with what Marquez holds: (a) the dataset exists under
its identity, (b) its schema, (c) its upstream edges, (d) its producer's run state against the engine state the
sensors observed, (e) no second identity for the same data, (f) the upstream still has the columns it reads (a
field the upstream gained warns). They run with each materialization and, for the
streaming assets, on a schedule.

A run reads the graph from Marquez's REST API ONCE: every asset's six checks belong to one subsettable multi-asset
check, one step that reads the graph and evaluates whichever checks the run selected (``build_lineage_checks``); the
check runs the sensors ask for are such runs (``latest_checks``). The read asks about the pipeline's own nodes
only (``marquez_graph``), so a check costs the same however much other teams' lineage Marquez holds.

When a check fails, the project's own events (the lineage outbox) are replayed to say why: sent but Marquez holds
something else, still queued, or never sent.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from lineage_assets.checks import compare
from lineage_assets.checks.graph import LineageGraph
from lineage_assets.checks.marquez_graph import from_marquez
from lineage_assets.connect.client import ConnectClient, ConnectError
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.flink.client import ACTIVE, FlinkClient, FlinkError
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.flink.runs import flink_run_id
from lineage_assets.lineage.identity import Dataset, Job, Pipeline
from lineage_assets.lineage.marquez_client import MarquezError
from lineage_assets.lineage.outbox import Counts
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

CHECKS = {
    "lineage_dataset_exists": "(a) the dataset is in the lineage graph under the identity lineage_assets gives",
    "lineage_schema_matches": "(b) its fields and types in the lineage graph equal the asset's column schema",
    "lineage_upstream_matches": "(c) its upstream edges in the lineage graph equal its Dagster dependencies",
    "lineage_run_state_agrees": "(d) its producer's latest lineage run agrees with the engine now (open while it "
    "runs, closed when not)",
    "lineage_single_identity": "(e) no second dataset in the lineage graph names the same physical data",
    "lineage_upstream_schema": "(f) its upstreams still have the columns it reads, as declared (new fields: warn)",
}


@dataclass(frozen=True)
class EngineNow:
    """What the producing engine says when the check runs: its state and the OpenLineage run it must have open."""

    state: str | None
    run_id: str | None = None
    what: str = ""


def engine_now(
    instance: dg.DagsterInstance,
    key: dg.AssetKey,
    job: Job | None,
    flink: FlinkClient | None,
    connect: ConnectClient | None,
) -> EngineNow:
    """The producing engine's state now, asked from the engine itself: the current Flink job of that name (GONE
    when the cluster or the job is gone), or the Connect connector's state (DELETED when it is gone); None for
    producers that do not run on their own."""
    if job is None:
        return EngineNow(None)
    if job.integration == "FLINK":
        if flink is None:
            return EngineNow(None, what="no Flink client was given to ask")
        try:
            current = flink.current(job.name)
        except FlinkError:
            return EngineNow("GONE", what=f"Flink at {flink.url} is unreachable")
        if current is None:
            return EngineNow("GONE", what=f"no Flink job named {job.name} on {flink.url}")
        run_id = flink_run_id(job, current.jid, current.start_time_ms) if current.state in ACTIVE else None
        return EngineNow(current.state, run_id, f"Flink job {current.jid}")
    if job.integration == "KAFKA_CONNECT":
        if connect is None:
            return EngineNow(None, what="no Kafka Connect client was given to ask")
        try:
            status = connect.status(job.name)
        except ConnectError:
            return EngineNow(None, what=f"Kafka Connect at {connect.url} is unreachable")
        if status is None:
            return EngineNow("DELETED", what=f"connector {job.name}")
        failed = status.state == "FAILED" or any(t.state == "FAILED" for t in status.tasks)
        return EngineNow("FAILED" if failed else status.state, what=f"connector {job.name}")
    return EngineNow(None)


def findings(graph: LineageGraph, ds: Dataset, pipeline: Pipeline, engine: EngineNow) -> dict[str, compare.Finding]:
    return {
        "lineage_dataset_exists": compare.dataset_exists(graph, ds),
        "lineage_schema_matches": compare.schema_matches(graph, ds),
        "lineage_upstream_matches": compare.upstream_matches(graph, ds, pipeline),
        "lineage_run_state_agrees": compare.run_state_agrees(
            graph, ds, pipeline, engine.state, engine.run_id, engine.what
        ),
        "lineage_single_identity": compare.no_second_identity(graph, ds),
        "lineage_upstream_schema": compare.upstream_schema_holds(graph, ds, pipeline),
    }


def read_graph(lineage: LineageResource, pipeline: Pipeline) -> LineageGraph | MarquezError:
    """The lineage graph Marquez holds now, or why it could not be read (every check then says so)."""
    try:
        return from_marquez(lineage.marquez(), pipeline)
    except MarquezError as exc:
        return exc


class Replay:
    """The project's own events (the outbox) as lineage graphs, read once however many checks fail: as sent, and
    with what is still queued. Explains a failed comparison (see compare.explain)."""

    def __init__(self, lineage: LineageResource) -> None:
        self._lineage = lineage
        self._graphs: tuple[LineageGraph, LineageGraph] | None = None
        self._counts: Counts | None = None

    @property
    def counts(self) -> Counts:
        if self._counts is None:
            self._counts = self._lineage.outbox().counts()
        return self._counts

    @property
    def graphs(self) -> tuple[LineageGraph, LineageGraph]:
        if self._graphs is None:
            outbox = self._lineage.outbox()
            self._graphs = (
                LineageGraph.from_events(outbox.events(("sent",))),
                LineageGraph.from_events(outbox.events(("sent", "queued"))),
            )
        return self._graphs


def marquez_findings(
    lineage: LineageResource,
    ds: Dataset,
    pipeline: Pipeline,
    engine: EngineNow,
    graph: LineageGraph | MarquezError | None = None,
    replay: Replay | None = None,
) -> dict[str, compare.Finding]:
    """The six findings on what Marquez holds (``graph``: read once by the caller, shared by every asset it
    checks); failures explained by replaying the outbox (``replay``: likewise shared)."""
    graph = read_graph(lineage, pipeline) if graph is None else graph
    if isinstance(graph, MarquezError):
        return {name: compare.Finding(False, f"cannot read the lineage graph: {graph}") for name in CHECKS}
    found = findings(graph, ds, pipeline, engine)
    if all(f.passed for f in found.values()):
        return found
    replay = replay or Replay(lineage)
    sent_graph, queued_graph = replay.graphs
    as_sent = findings(sent_graph, ds, pipeline, engine)
    with_queued = findings(queued_graph, ds, pipeline, engine)
    counts = replay.counts
    return {
        name: compare.explain(f, as_sent[name], with_queued[name], counts.queued, counts.backlog_age)
        for name, f in found.items()
    }


def _metadata(finding: compare.Finding) -> dict[str, object]:
    return {"finding": finding.message, **{k: dg.MetadataValue.json(v) for k, v in finding.details.items()}}


#: the one step that evaluates every lineage check of every asset
CHECKS_NAME = "lineage_checks"


def build_lineage_checks(pipeline: Pipeline) -> list[dg.AssetChecksDefinition]:
    """One multi-asset check carrying the six checks of every asset, subsettable: a run (the checks job, the
    5-minute schedule, one check from the UI) executes it as ONE step that reads the Marquez graph and the outbox
    once and evaluates only the selected checks. One step per asset would read the graph once per asset, and the
    multiprocess executor runs steps in separate processes, so they could not share a read."""
    datasets = {asset_key(ds): ds for ds in pipeline.datasets.values()}

    @dg.multi_asset_check(
        specs=[
            dg.AssetCheckSpec(name, asset=key, description=text) for key in datasets for name, text in CHECKS.items()
        ],
        name=CHECKS_NAME,
        description="the lineage checks (a)-(f) of every asset, against one read of the Marquez graph",
        can_subset=True,
    )
    def lineage_checks(
        context: dg.AssetCheckExecutionContext, lineage: LineageResource, flink: FlinkResource, connect: ConnectResource
    ):
        selected = context.selected_asset_check_keys
        keys = [key for key in datasets if any(k.asset_key == key for k in selected)]
        graph = read_graph(lineage, pipeline)
        replay = Replay(lineage)
        flink_client, connect_client = flink.client(), connect.client()
        for key in keys:
            ds = datasets[key]
            engine = engine_now(context.instance, key, pipeline.jobs.get(ds.producer), flink_client, connect_client)
            for result in lineage_results(lineage, ds, pipeline, engine, graph, replay):
                if dg.AssetCheckKey(key, result.check_name) in selected:
                    yield result

    return [lineage_checks]


def lineage_results(
    lineage: LineageResource,
    ds: Dataset,
    pipeline: Pipeline,
    engine: EngineNow,
    graph: LineageGraph | MarquezError | None = None,
    replay: Replay | None = None,
) -> list[dg.AssetCheckResult]:
    """The six lineage checks' results for ``ds``."""
    replay = replay or Replay(lineage)
    counts = replay.counts
    delivery = {"lineage/backlog": counts.queued, "lineage/backlog_age_s": round(counts.backlog_age, 1)}
    return [
        dg.AssetCheckResult(
            asset_key=asset_key(ds),
            check_name=name,
            passed=finding.passed,
            severity=dg.AssetCheckSeverity.WARN if finding.warning else dg.AssetCheckSeverity.ERROR,
            description=finding.message,
            metadata={**_metadata(finding), **delivery, "marquez/node_id": ds.node_id},
        )
        for name, finding in marquez_findings(lineage, ds, pipeline, engine, graph, replay).items()
    ]


#: the job of the streaming assets' checks: the 5-minute schedule runs all of them, the sensors those of what they
#: just materialized (lineage_assets/latest_checks.py)
STREAMING_CHECKS_JOB = "streaming_lineage_checks"


def streaming_assets(pipeline: Pipeline) -> list[dg.AssetKey]:
    """The assets whose producers run forever."""
    return [asset_key(ds) for ds in pipeline.datasets.values() if _streaming(pipeline, ds)]


def build_streaming_checks_job(pipeline: Pipeline) -> "UnresolvedAssetJobDefinition":
    """Every check of the streaming assets, its steps one after another in the run's own process: a check run is
    small and frequent, and a process per step would cost more than the checks on two cores."""
    return dg.define_asset_job(
        STREAMING_CHECKS_JOB,
        selection=dg.AssetSelection.checks_for_assets(*streaming_assets(pipeline)),
        executor_def=dg.in_process_executor,
        description="the checks of the streaming assets: all of them on a schedule, and after a sensor records a "
        "materialization those of that asset",
    )


def build_streaming_checks_schedule(job: "UnresolvedAssetJobDefinition", every_minutes: int) -> dg.ScheduleDefinition:
    """The checks of the assets whose producers run forever, every ``every_minutes`` (LINEAGE_LAB_CHECKS_EVERY_MINUTES,
    a divisor of 60: a stopped job shows up here even when no sensor materializes anything)."""
    return dg.ScheduleDefinition(
        name="streaming_lineage_checks_schedule",
        job=job,
        cron_schedule="0 * * * *" if every_minutes == 60 else f"*/{every_minutes} * * * *",
        description=f"every streaming asset's checks, every {every_minutes} minutes",
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )


def _streaming(pipeline: Pipeline, ds: Dataset) -> bool:
    job = pipeline.jobs.get(ds.producer)
    return job is not None and job.processing_type == "STREAMING"
