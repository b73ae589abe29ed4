"""The main job: the whole pipeline against the running stack, recorded in the stack's Dagster instance so every
step shows in the UI. Deploys the source and streaming assets, makes sure every sensor and schedule is on,
generates orders, waits until Flink has committed them to Iceberg and until the new-orders sensor has had today's
supplier_stats computed by Spark (the batch side runs on its own, as it will after this job ends), runs every
asset check and the drift report, and prints where to look. ``lineage-lab pipeline run`` (and so
``scripts/run.sh``) calls it.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from infra.services.dagster import DagsterDev, dagster_cli
from infra.settings import REPO_ROOT, StackSettings
from lineage_assets.checks.verify import verify_and_render
from lineage_assets.connect.client import ConnectClient, ConnectError
from lineage_assets.lineage.marquez import MarquezError, lineage_page
from lineage_assets.lineage.outbox import Outbox
from lineage_assets.main_jobs import CHECKS_JOB, DEPLOY_JOB
from lineage_assets.metadata import asset_key

BATCH = "iceberg_supplier_stats"
#: the sensor that requests supplier_stats for the days new Iceberg snapshots touched
BATCH_SENSOR = "supplier_stats_new_orders_sensor"
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


class PipelineError(RuntimeError):
    """A step of the main job failed; the message says which and where to look."""


def run_pipeline(settings: StackSettings, orders: int = 200, log: Callable[[str], None] = print) -> bool:
    """Run every step; returns whether no asset check failed (warnings are printed) and the drift report passed."""
    from lineage_assets.definitions import defs, pipeline

    runs = _runner(settings, defs)
    instance = runs.instance
    resources = defs.resources

    started = dt.datetime.now(dt.UTC)
    log(
        "- deploy: source table, orders topic + CDC connector, archive sink, iceberg-ingestion and supplier-stats "
        "Flink jobs"
    )
    runs.run(DEPLOY_JOB, "deploying the streaming assets")
    _start_automation(runs.home, runs.workspace, log)

    log(f"- generate {orders} orders into the source table")
    rate = max(20.0, orders / 10)
    runs.run(
        "generate_orders_job",
        "generating orders",
        {"ops": {"generate_orders": {"config": {"count": orders, "rate_per_second": rate}}}},
    )

    log("- wait until iceberg-ingestion has committed them to Iceberg default.orders")
    # built as Dagster builds it for a run: secrets given as EnvVar resolve to their values
    with dg.build_resources({"iceberg": resources["iceberg"], "connect": resources["connect"]}) as built:
        table = built.iceberg.catalog().load_table(pipeline.dataset("iceberg_orders").symlinks[0].name)
        connect = built.connect.client()
    # in the pipeline's order, the CDC source first: the diagnosis names the first failed connector
    connectors = [j.name for j in pipeline.jobs.values() if j.integration == "KAFKA_CONNECT"]
    _wait(
        lambda: len(_bid_times_since(table, started)) >= orders,
        300,
        lambda: (
            "the generated orders did not reach Iceberg in 5 min: "
            + _ingestion_diagnosis(connect, connectors, len(_bid_times_since(table, started)), orders)
        ),
    )
    committed = table.refresh().current_snapshot()

    # the days the orders carry (their bid_time, UTC), not the date now: orders generated just before midnight
    days = sorted({t.date().isoformat() for t in _bid_times_since(table, started)})
    log(
        f"- wait until {BATCH_SENSOR} has had supplier_stats for {', '.join(days)} computed from them "
        "(PySpark over Iceberg)"
    )
    batch_key = asset_key(pipeline.dataset(BATCH))
    since = committed.timestamp_ms / 1000
    found: dict[str, dg.RunRecord] = {}

    def batch_runs_finished() -> bool:
        for day in days:
            if day not in found and (records := _runs_reading(instance, batch_key, day, since)):
                found[day] = records[0]
        return len(found) == len(days)

    # two Spark runs one after the other in the worst case (one started on an earlier snapshot of these orders)
    timeout = 600
    _wait(
        batch_runs_finished,
        timeout,
        lambda: (
            f"no supplier_stats run for {', '.join(d for d in days if d not in found)} finished within "
            f"{timeout // 60} min of the orders reaching Iceberg. "
            + _batch_diagnosis(instance, batch_key, asset_key(pipeline.dataset("iceberg_orders")), days, since)
        ),
    )
    for day in days:
        run = found[day].dagster_run
        if run.status != dg.DagsterRunStatus.SUCCESS:
            raise PipelineError(
                f"supplier_stats for {day} ended {run.status.value} (run {run.run_id}); open it in the UI"
            )
        log(f"  {day}: run {run.run_id} ({run.tags.get('dagster/sensor_name', 'requested by hand')}) succeeded")

    log("- wait for the sensors' first lineage of both connectors")
    outbox = Outbox(settings.lineage_outbox)
    _wait(
        lambda: set(connectors) <= {e["job"]["name"] for e in outbox.events()},
        120,
        "the connector sensor sent no lineage in 2 min; is the Dagster daemon running (`dagster dev`)?",
    )

    log(f"- wait until Marquez ({settings.marquez_url}) holds every lineage event (the outbox drained)")
    _wait(
        lambda: outbox.counts().queued == 0,
        180,
        "lineage events are still queued after 3 min: is Marquez up (`lineage-lab stack status`) and the "
        "lineage-drainer running? `lineage-lab lineage outbox` shows what waits and why",
    )
    rejected = outbox.dead_letters()
    if rejected:
        log(f"  {len(rejected)} event(s) were rejected by Marquez; `lineage-lab lineage outbox` lists the reasons")

    log("- run every asset check (against what Marquez holds)")
    evaluations = runs.check_evaluations(runs.run(CHECKS_JOB, "running the asset checks", must_succeed=False))
    warned = [e for e in evaluations if not e.passed and e.severity == dg.AssetCheckSeverity.WARN]
    failed = [e for e in evaluations if not e.passed and e.severity != dg.AssetCheckSeverity.WARN]
    passed = len(evaluations) - len(warned) - len(failed)
    log(f"  {len(evaluations)} checks: {passed} passed, {len(warned)} warned, {len(failed)} failed")
    for e in warned:
        log(f"  WARNING {e.asset_key.to_user_string()} {e.check_name}: {e.description}")
    for e in failed:
        log(f"  FAILED {e.asset_key.to_user_string()} {e.check_name}: {e.description}")

    try:
        report, picture = verify_and_render(settings)
    except MarquezError as exc:
        raise PipelineError(f"the drift report cannot read Marquez: {exc}") from exc
    drift = "none" if report.ok else f"{len(report.drift)} difference(s)"
    orders = pipeline.dataset("kafka_orders")
    log("- drift report (lineage-lab verify)")
    log("\n".join(f"  {line}" for line in report.text().splitlines()))
    log(
        f"""
Where to look:
  Dagster UI          {settings.dagster_url} (runs of this job are tagged lineage-lab/step)
  Marquez UI          {lineage_page(settings.marquez_web_url, orders.namespace, orders.name)}
  lineage picture     {picture}
  lineage events      Marquez API {settings.marquez_url}; delivery queue {settings.lineage_outbox}
                      (`lineage-lab lineage outbox`)
  graph               {len(pipeline.jobs)} jobs, {len(pipeline.datasets)} datasets; drift: {drift}
"""
    )
    return not failed and report.ok


class _InProcessRuns:
    """The embedded stack: each job runs in this process, recorded in the `dagster dev` instance (so in its UI)."""

    def __init__(self, settings: StackSettings, defs: dg.Definitions) -> None:
        self.home = DagsterDev(settings).dagster_home
        self.workspace = REPO_ROOT / "workspace.yaml"
        self.instance = dg.DagsterInstance.from_config(str(self.home))
        self.defs = defs

    def run(self, job: str, what: str, run_config: dict | None = None, must_succeed: bool = True) -> str:
        result = self.defs.resolve_job_def(job).execute_in_process(
            run_config=run_config, instance=self.instance, raise_on_error=False
        )
        if must_succeed and not result.success:
            raise PipelineError(f"{what} failed (run {result.run_id}); open it in the Dagster UI for the error")
        return result.run_id

    def check_evaluations(self, run_id: str) -> list[dg.AssetCheckEvaluation]:
        records = self.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        return [r.event_log_entry.dagster_event.event_specific_data for r in records.records]


class _SubmittedRuns(_InProcessRuns):
    """A Dagster deployment (``LINEAGE_LAB_EXTERNAL_DAGSTER``): each job is submitted to its webserver and run by
    its run launcher (in the Compose deployment, a container per run); the instance is the deployment's own
    (``DAGSTER_HOME``, e.g. its PostgreSQL run storage) and so is the workspace beside it."""

    def __init__(self, settings: StackSettings, defs: dg.Definitions) -> None:
        from urllib.parse import urlsplit

        from dagster_graphql import DagsterGraphQLClient

        home = os.environ.get("DAGSTER_HOME")
        if not home:
            raise PipelineError(
                "LINEAGE_LAB_EXTERNAL_DAGSTER is set but DAGSTER_HOME is not: point it at the deployment's instance "
                "folder (its dagster.yaml and workspace.yaml), e.g. infra/compose/dagster/"
            )
        self.home = Path(home)
        self.workspace = self.home / "workspace.yaml"
        self.instance = dg.DagsterInstance.get()
        self.defs = defs
        url = urlsplit(settings.dagster_url)
        self.client = DagsterGraphQLClient(
            url.hostname or "", port_number=url.port, use_https=url.scheme == "https", timeout=60
        )

    def run(self, job: str, what: str, run_config: dict | None = None, must_succeed: bool = True) -> str:
        from dagster_graphql import DagsterGraphQLClientError

        try:
            run_id = self.client.submit_job_execution(job, run_config=run_config)
        except (DagsterGraphQLClientError, OSError) as exc:
            raise PipelineError(f"{what}: the Dagster webserver did not take job {job}: {exc}") from exc
        _wait(
            lambda: self.instance.get_run_by_id(run_id).status in FINISHED,
            900,
            f"{what}: run {run_id} of {job} did not finish in 15 min; is the Dagster daemon running? See the UI",
        )
        status = self.instance.get_run_by_id(run_id).status
        if must_succeed and status != dg.DagsterRunStatus.SUCCESS:
            raise PipelineError(f"{what} ended {status.value} (run {run_id}); open it in the Dagster UI")
        return run_id


def _runner(settings: StackSettings, defs: dg.Definitions) -> _InProcessRuns:
    return _SubmittedRuns(settings, defs) if settings.external_dagster else _InProcessRuns(settings, defs)


def _start_automation(home: Path, workspace: Path, log: Callable[[str], None]) -> None:
    """Every sensor and schedule on (they are on by default; this also restarts any that were stopped)."""
    for kind in ("sensor", "schedule"):
        result = dagster_cli(home, workspace, kind, "start", "--start-all")
        if result.returncode != 0:
            raise PipelineError(f"could not turn the {kind}s on: {(result.stderr or result.stdout).strip()[-300:]}")
        log(f"- every {kind} on")


def _runs_reading(instance: dg.DagsterInstance, key: dg.AssetKey, day: str, since: float) -> list[dg.RunRecord]:
    """Finished runs of ``key`` for partition ``day`` that started after ``since`` (a Unix time), newest first: a
    run started after a snapshot was committed reads the table with that snapshot's data."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={"dagster/partition": day}, statuses=list(FINISHED)), limit=50
    )
    return [r for r in records if key in (r.dagster_run.asset_selection or ()) and (r.start_time or 0) >= since]


def _ingestion_diagnosis(connect: ConnectClient, connectors: list[str], arrived: int, orders: int) -> str:
    """Why generated orders are not in Iceberg: a failed connector (the CDC source first) says it outright."""
    for name in connectors:
        try:
            status = connect.status(name)
        except ConnectError as exc:
            return str(exc)
        if status is None:
            return f"connector {name} does not exist in Kafka Connect; materialize the deploy job's assets again"
        failed = status.failed_tasks
        if status.state == "FAILED" or failed:
            trace = (failed[0].trace if failed else "") or ""
            causes = [line for line in trace.splitlines() if line.startswith("Caused by:")]
            cause = (causes[-1] if causes else trace.splitlines()[0] if trace else "no trace").strip()
            return (
                f"connector {name} is FAILED ({cause[:400]}); fix the cause, then restart it: "
                f"`curl -X POST '{connect.url}/connectors/{name}/restart?includeTasks=true&onlyFailed=true'`"
            )
    return (
        f"{arrived} of {orders} are there and the connectors run; check the iceberg-ingestion job in the Flink UI "
        "(a failing or restarting job, its dead-letter topic) and `flink_job_sensor`'s ticks"
    )


def _batch_diagnosis(
    instance: dg.DagsterInstance, key: dg.AssetKey, source: dg.AssetKey, days: list[str], since: float
) -> str:
    """What the new-orders chain did with the orders committed at ``since``, as the next place to look."""
    recorded = [
        r for r in instance.fetch_materializations(source, limit=20).records if r.timestamp >= since and not r.run_id
    ]
    if not recorded:
        return (
            f"flink_job_sensor has recorded no materialization of {source.to_user_string()} since the orders' snapshot "
            "(it records one per new Iceberg snapshot): is the Dagster daemon running (`lineage-lab stack status`) "
            "and flink_job_sensor on? Its ticks in the UI say why"
        )
    seen = []
    for day in days:
        records = instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/partition": day}), limit=10)
        for r in records:
            if key in (r.dagster_run.asset_selection or ()) and (r.create_timestamp.timestamp() >= since - 600):
                started = dt.datetime.fromtimestamp(r.start_time, dt.UTC).strftime("%H:%M:%S") if r.start_time else "-"
                seen.append(f"{r.dagster_run.run_id} ({day}) {r.dagster_run.status.value}, started {started}")
    if not seen:
        return (
            f"{BATCH_SENSOR} requested no run although flink_job_sensor recorded the new snapshot: is it on? "
            "Its ticks in the UI say why"
        )
    committed = dt.datetime.fromtimestamp(since, dt.UTC).strftime("%H:%M:%S")
    return (
        f"Runs of supplier_stats (the orders' snapshot was committed at {committed} UTC; a run must start after "
        f"it): {'; '.join(seen)}. A QUEUED run waits for a free run slot or the Spark pool; see the UI's run queue"
    )


def _bid_times_since(table, since: dt.datetime) -> list[dt.datetime]:
    """The bid_time (UTC) of every Iceberg order from ``since`` on, read from the table's current snapshot."""
    from pyiceberg.expressions import GreaterThanOrEqual

    scan = table.refresh().scan(
        row_filter=GreaterThanOrEqual("bid_time", since.replace(tzinfo=None).isoformat()), selected_fields=("bid_time",)
    )
    return scan.to_arrow().column("bid_time").to_pylist()


def _wait(condition: Callable[[], bool], timeout: float, message: str | Callable[[], str]) -> None:
    """Poll ``condition`` until it holds; after ``timeout`` s fail with ``message`` (a callable: worked out then)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise PipelineError(message() if callable(message) else message)
        time.sleep(3)
