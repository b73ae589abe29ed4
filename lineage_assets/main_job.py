"""The main job: the whole pipeline against the running stack, recorded in the stack's Dagster instance so every
step shows in the UI. Deploys the source and streaming assets, makes sure every sensor and schedule is on,
generates orders, waits until Flink has committed them to Iceberg and until the new-orders sensor has had today's
supplier_stats computed by Spark (the batch side runs on its own, as it will after this job ends), runs every
asset check and the drift report, and prints where to look. ``lineage-lab pipeline run`` (and so
``scripts/run.sh``) calls it.
"""

from __future__ import annotations

import datetime as dt
import gc
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TextIO

import dagster as dg

from infra.progress import Steps
from infra.services.dagster import DagsterDev, dagster_cli
from infra.settings import REPO_ROOT, StackSettings
from lineage_assets.checks.drift_report import verify_and_render
from lineage_assets.connect.client import ConnectClient, ConnectError
from lineage_assets.jobs import CHECKS_JOB, DEPLOY_JOB
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezError, lineage_page
from lineage_assets.lineage.outbox import Outbox
from lineage_assets.metadata import asset_key
from lineage_assets.resources import opened_resources
from lineage_assets.spark.new_orders_sensor import SUPPLIER_STATS_DAYS_JOB, owed_days

BATCH = "iceberg_supplier_stats"
#: the sensor that requests supplier_stats for the days new Iceberg snapshots touched
BATCH_SENSOR = "supplier_stats_new_orders_sensor"
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
#: the console output of the main job's in-process Dagster runs: a file per pipeline run in this folder of the
#: stack's logs folder
RUN_LOGS = "pipeline"
#: lines of that log a failed run's error ends with
LOG_TAIL = 30


class PipelineError(RuntimeError):
    """A step of the main job failed; the message says which and where to look."""


def run_main_job(defs: dg.Definitions, settings: StackSettings, orders: int = 200, out: TextIO | None = None) -> bool:
    """Run every step of ``defs`` (built from ``settings`` by the caller), printing one line per step (duration,
    result; warnings and failures in full) to ``out`` (stdout); returns whether no asset check failed and the drift
    report passed. A step that fails raises PipelineError after its error has been printed."""
    pipeline = Pipeline.from_settings(settings)
    steps = Steps(out, width=30)
    runs = _runner(settings, defs)
    try:
        return _steps(settings, orders, pipeline, defs, runs, steps)
    except PipelineError as exc:
        if steps.failed:  # printed in full under its step
            raise PipelineError(f"the pipeline stopped at step '{steps.failed}' (its error is above)") from exc
        raise


def _steps(settings: StackSettings, orders: int, pipeline, defs, runs: _InProcessRuns, steps: Steps) -> bool:
    instance = runs.instance
    begun = time.monotonic()
    steps.write(f"Pipeline run, {orders} orders. {runs.where()}")

    started = dt.datetime.now(dt.UTC)
    _job_step(steps, runs, "deploy the streaming assets", DEPLOY_JOB)
    with steps.step("sensors and schedules on"):
        _start_automation(runs.home, runs.workspace)
    rate = max(20.0, orders / 10)
    config = {"ops": {"generate_orders": {"config": {"count": orders, "rate_per_second": rate}}}}
    _job_step(steps, runs, f"generate {orders} orders", "generate_orders_job", config)

    with steps.step("orders into Iceberg (Flink)") as step:
        opened = opened_resources(settings, ("iceberg", "connect"))
        table = opened.iceberg.catalog().load_table(pipeline.dataset("iceberg_orders").table_name)
        connect = opened.connect.client()
        # in the pipeline's order, the CDC source first: the diagnosis names the first failed connector
        connectors = [j.name for j in pipeline.jobs.values() if j.integration == "KAFKA_CONNECT"]
        arrived = 0

        def all_arrived() -> bool:
            nonlocal arrived
            arrived = len(_bid_times_since(table, started))
            step.progress(arrived, orders, "orders")
            return arrived >= orders

        _wait(
            all_arrived,
            300,
            lambda: (
                "the generated orders did not reach Iceberg in 5 min: "
                + _ingestion_diagnosis(connect, connectors, arrived, orders)
            ),
        )
        committed = table.refresh().current_snapshot()
        step.ok(f"{arrived} orders in default.orders, snapshot {committed.snapshot_id}")

    # the days the orders carry (their bid_time, UTC), not the date now: orders generated just before midnight
    days = sorted({t.date().isoformat() for t in _bid_times_since(table, started)})
    batch_key = asset_key(pipeline.dataset(BATCH))
    since = committed.timestamp_ms / 1000
    with steps.step("supplier_stats (Spark)") as step:
        found: dict[str, dg.RunRecord] = {}

        def batch_runs_finished() -> bool:
            for day in days:
                if day not in found and (records := _runs_reading(instance, batch_key, day, since)):
                    found[day] = records[0]
            stages = [(3, f"{day} done") if day in found else _stage(instance, batch_key, day, since) for day in days]
            step.progress(sum(s for s, _ in stages), 3 * len(days), ", ".join(n for _, n in stages))
            return len(found) == len(days)

        # two Spark runs one after the other in the worst case (one started on an earlier snapshot of these orders)
        timeout = 600
        _wait(
            batch_runs_finished,
            timeout,
            lambda: (
                f"no supplier_stats run for {', '.join(d for d in days if d not in found)} finished within "
                f"{timeout // 60} min of the orders reaching Iceberg (sensor {BATCH_SENSOR}). "
                + _batch_diagnosis(instance, batch_key, asset_key(pipeline.dataset("iceberg_orders")), days, since)
            ),
        )
        for day in days:
            run = found[day].dagster_run
            if run.status != dg.DagsterRunStatus.SUCCESS:
                raise PipelineError(
                    f"supplier_stats for {day} ended {run.status.value}: run {runs.url(run.run_id)}\n"
                    + "\n".join(runs.errors(run.run_id))
                )
        step.ok("; ".join(f"{day} run {runs.url(found[day].dagster_run.run_id)}" for day in days))

    with steps.step("lineage of both connectors"):
        outbox = Outbox(settings.lineage_outbox)
        _wait(
            lambda: set(connectors) <= {e["job"]["name"] for e in outbox.events()},
            120,
            "the connector sensor sent no lineage in 2 min; is the Dagster daemon running (`dagster dev`)?",
        )

    with steps.step("lineage delivered to Marquez") as step:
        _wait(
            lambda: outbox.counts().queued == 0,
            180,
            f"lineage events are still queued after 3 min: is Marquez ({settings.marquez_url}) up "
            "(`lineage-lab stack status`) and the lineage-drainer running? `lineage-lab lineage outbox` shows what "
            "waits and why",
        )
        rejected = outbox.dead_letters()
        step.ok(f"outbox drained into {settings.marquez_url}")
        if rejected:
            step.warn(
                f"{len(rejected)} event(s) rejected by Marquez",
                *(f"#{d.seq} {d.job} {d.event_type} run {d.run_id}: {d.reason}" for d in rejected[-3:]),
                "`lineage-lab lineage outbox` lists every one with its reason",
            )

    with steps.step("asset checks") as step:
        run_id = runs.run(CHECKS_JOB, "running the asset checks", must_succeed=False)
        evaluations = runs.check_evaluations(run_id)
        warned = [e for e in evaluations if not e.passed and e.severity == dg.AssetCheckSeverity.WARN]
        failed = [e for e in evaluations if not e.passed and e.severity != dg.AssetCheckSeverity.WARN]
        passed = len(evaluations) - len(warned) - len(failed)
        summary = (
            f"{len(evaluations)} checks: {passed} passed, {len(warned)} warned, {len(failed)} failed "
            f"(run {runs.url(run_id)})"
        )
        details = [f"WARNING {e.asset_key.to_user_string()} {e.check_name}: {e.description}" for e in warned] + [
            f"FAILED {e.asset_key.to_user_string()} {e.check_name}: {e.description}" for e in failed
        ]
        errors = runs.errors(run_id)
        if failed or errors:
            step.fail(summary, *details, *errors)
        elif warned:
            step.warn(summary, *details)
        else:
            step.ok(summary)

    with steps.step("drift report") as step:
        try:
            report, picture = verify_and_render(settings)
        except MarquezError as exc:
            raise PipelineError(f"the drift report cannot read Marquez: {exc}") from exc
        graph = f"{len(pipeline.jobs)} jobs, {len(pipeline.datasets)} datasets"
        if report.ok:
            step.ok(f"no drift ({graph}); picture {picture}")
        else:
            step.fail(
                f"{len(report.drift)} difference(s) ({graph}); `lineage-lab verify` shows both graphs side by side",
                *report.drift,
                f"picture {picture}",
            )

    kafka_orders = pipeline.dataset("kafka_orders")
    verdict = "done" if not steps.problems else f"done with {steps.problems} step(s) not ok"
    steps.write(f"Pipeline {verdict} in {time.monotonic() - begun:.0f} s. Dagster runs: {settings.dagster_url}/runs")
    steps.write(
        "Lineage of Kafka orders in Marquez: "
        + lineage_page(settings.marquez_web_url, kafka_orders.namespace, kafka_orders.name)
    )
    return not failed and report.ok and not errors


def _job_step(steps: Steps, runs: _InProcessRuns, name: str, job: str, run_config: dict | None = None) -> str:
    """A step that is one Dagster run: its line links the run; warnings its events carry print in full."""
    with steps.step(name) as step:
        run_id = runs.run(job, name, run_config)
        warnings = runs.warnings(run_id)
        if warnings:
            step.warn(f"run {runs.url(run_id)}", *warnings)
        else:
            step.ok(f"run {runs.url(run_id)}")
    return run_id


def _stage(instance: dg.DagsterInstance, key: dg.AssetKey, day: str, since: float) -> tuple[int, str]:
    """How far the newest run of ``key`` for ``day`` requested after ``since`` is: 0 none yet, 1 queued, 2 running
    (a finished one that qualifies is counted by the caller); and a word on it for the progress line."""
    records = instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/partition": day}), limit=10)
    for r in records:
        if _computes(r.dagster_run, key) and r.create_timestamp.timestamp() >= since:
            status = r.dagster_run.status
            return (2 if status == dg.DagsterRunStatus.STARTED else 1), f"{day} {status.value.lower()}"
    return 0, f"{day} waiting for the sensor"


class _InProcessRuns:
    """The embedded stack: each job runs in this process, recorded in the `dagster dev` instance (so in its UI);
    the console output of the runs (Dagster's event log as text, DEBUG included) goes to a log file."""

    def __init__(self, settings: StackSettings, defs: dg.Definitions) -> None:
        self.home = DagsterDev(settings).dagster_home
        self.workspace = REPO_ROOT / "workspace.yaml"
        self.instance = dg.DagsterInstance.from_config(str(self.home))
        self.defs = defs
        self.dagster_url = settings.dagster_url
        self.log_path: Path | None = _new_run_log(settings.logs_dir / RUN_LOGS)

    def where(self) -> str:
        return f"The Dagster runs' events: their pages in the UI; their console output: {self.log_path}"

    def url(self, run_id: str) -> str:
        return f"{self.dagster_url}/runs/{run_id}"

    def run(self, job: str, what: str, run_config: dict | None = None, must_succeed: bool = True) -> str:
        assert self.log_path is not None
        with _console_to(self.log_path):
            print(f"=== {job} ({what}) {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}", flush=True)
            result = self.defs.resolve_job_def(job).execute_in_process(
                run_config=run_config, instance=self.instance, raise_on_error=False
            )
            gc.collect()  # clients the run dropped say goodbye (librdkafka writes to fd 2) into the log too
        if must_succeed and not result.success:
            raise PipelineError(self.failure(result.run_id, what))
        return result.run_id

    def failure(self, run_id: str, what: str) -> str:
        """What a failed run says: its errors in full, the end of its console output, where to look."""
        text = [f"{what} failed: run {self.url(run_id)}", *self.errors(run_id)]
        if self.log_path is not None:
            tail = self.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL:]
            text += [f"the last {len(tail)} lines of {self.log_path}:", *(f"  {line}" for line in tail)]
        return "\n".join(text)

    def errors(self, run_id: str) -> list[str]:
        """The errors of a run's failed steps (or of the run), each in full with its stack trace."""
        failures = self.instance.all_logs(
            run_id, of_type={dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE}
        )
        found = []
        for entry in failures:
            event = entry.dagster_event
            data = event.event_specific_data if event else None
            error = getattr(data, "error", None)
            where = f"step {entry.step_key}" if entry.step_key else "run"
            found.append(f"{where}: {error.to_string().rstrip() if error else entry.user_message}")
        return found

    def warnings(self, run_id: str) -> list[str]:
        """Messages a run logged at WARNING or above (its failures aside: :meth:`errors` has them in full)."""
        found = []
        for entry in self.instance.all_logs(run_id):
            event = entry.dagster_event
            if entry.level >= logging.WARNING and not (event and event.is_failure):
                found.append(f"{entry.step_key or 'run'}: {entry.user_message}")
        return found

    def check_evaluations(self, run_id: str) -> list[dg.AssetCheckEvaluation]:
        records = self.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        return [r.event_log_entry.dagster_event.event_specific_data for r in records.records]


#: the tags of the runs the main job submits to a deployment: Dagster's run queue launches a higher priority first, so
#: its runs (someone waits on them) go ahead of the check runs its sensors and schedule queue meanwhile
SUBMITTED_RUN_TAGS = {"dagster/priority": "10"}


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
        self.dagster_url = settings.dagster_url
        self.log_path = None  # each run's console output is where its run launcher put it
        url = urlsplit(settings.dagster_url)
        self.client = DagsterGraphQLClient(
            url.hostname or "", port_number=url.port, use_https=url.scheme == "https", timeout=60
        )

    def run(self, job: str, what: str, run_config: dict | None = None, must_succeed: bool = True) -> str:
        from dagster_graphql import DagsterGraphQLClientError

        try:
            run_id = self.client.submit_job_execution(job, run_config=run_config, tags=SUBMITTED_RUN_TAGS)
        except (DagsterGraphQLClientError, OSError) as exc:
            raise PipelineError(f"{what}: the Dagster webserver did not take job {job}: {exc}") from exc
        _wait(
            lambda: self.instance.get_run_by_id(run_id).status in FINISHED,
            900,
            f"{what}: run {run_id} of {job} did not finish in 15 min; is the Dagster daemon running? See the UI",
        )
        status = self.instance.get_run_by_id(run_id).status
        if must_succeed and status != dg.DagsterRunStatus.SUCCESS:
            raise PipelineError(self.failure(run_id, f"{what} ended {status.value}"))
        return run_id

    def where(self) -> str:
        return f"The Dagster runs: their pages in the UI of {self.dagster_url}"


def _new_run_log(folder: Path, keep: int = 20) -> Path:
    """A new log file for this pipeline run's Dagster console output; only the ``keep`` newest are kept."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in sorted(folder.glob("run-*.log"))[: -keep + 1]:
        old.unlink(missing_ok=True)
    path = folder / f"run-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}-{os.getpid()}.log"
    path.touch()
    return path


@contextmanager
def _console_to(path: Path) -> Iterator[None]:
    """Everything written to stdout and stderr, by Python or by native code (librdkafka, a JVM), goes to ``path``
    (appended) inside the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with path.open("a") as log, redirect_stdout(log), redirect_stderr(log):
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                log.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def _runner(settings: StackSettings, defs: dg.Definitions) -> _InProcessRuns:
    return _SubmittedRuns(settings, defs) if settings.external_dagster else _InProcessRuns(settings, defs)


def _start_automation(home: Path, workspace: Path) -> None:
    """Every sensor and schedule on (they are on by default; this also restarts any that were stopped). The two
    ``dagster`` commands at once: each loads the code location, most of its time."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda kind: (kind, dagster_cli(home, workspace, kind, "start", "--start-all")),
                           ("sensor", "schedule"))  # fmt: skip
        for kind, result in results:
            if result.returncode != 0:
                raise PipelineError(f"could not turn the {kind}s on: {(result.stderr or result.stdout).strip()}")


def _computes(run: dg.DagsterRun, key: dg.AssetKey) -> bool:
    """Whether a run materializes ``key``: the sensor's job of that asset alone (its runs name no selection) or a
    run with ``key`` selected."""
    return run.job_name == SUPPLIER_STATS_DAYS_JOB or key in (run.asset_selection or ())


def _runs_reading(instance: dg.DagsterInstance, key: dg.AssetKey, day: str, since: float) -> list[dg.RunRecord]:
    """Finished runs of ``key`` for partition ``day`` that started after ``since`` (a Unix time), newest first: a
    run started after a snapshot was committed reads the table with that snapshot's data."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={"dagster/partition": day}, statuses=list(FINISHED)), limit=50
    )
    return [r for r in records if _computes(r.dagster_run, key) and (r.start_time or 0) >= since]


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
            if _computes(r.dagster_run, key) and (r.create_timestamp.timestamp() >= since - 600):
                started = dt.datetime.fromtimestamp(r.start_time, dt.UTC).strftime("%H:%M:%S") if r.start_time else "-"
                seen.append(f"{r.dagster_run.run_id} ({day}) {r.dagster_run.status.value}, started {started}")
    if not seen:
        owed = sorted(set(owed_days(instance, BATCH_SENSOR)) & set(days))
        if owed:
            return (
                f"{BATCH_SENSOR} owes {', '.join(owed)} a run under its freshness budget "
                "(LINEAGE_LAB_SUPPLIER_STATS_FRESHNESS_S): it asks for it with the next materialization of the orders "
                "table once the budget has passed; is iceberg-ingestion still running? Its ticks in the UI say when"
            )
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
