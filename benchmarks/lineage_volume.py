"""Lineage at volume (issues 15 and 26): with 10,000 datasets of other teams in Marquez, how long do
`lineage-lab verify`, every asset check (in-process, and as the product runs them: the checks jobs launched on the
running Dagster) and one tick of every sensor take? Targets: every asset check <= 10 s, verify <= 30 s, a sensor
tick <= 5 s.

Load. Synthetic lineage of other teams goes in the way the project's own does, through the outbox
(``Outbox.enqueue`` then a ``Drainer.flush`` with parallel workers: Marquez's lineage API takes one event per POST),
so the load also measures the drainer's throughput into a Marquez that grows. The outbox is a private file in a
temporary directory, not the stack's: the stack's lineage-drainer would deliver it at the same time and its backlog
would show in every check's ``lineage/backlog`` for the engineers sharing the stack.

The volume: ``--teams`` teams (default 200) of 10 batch jobs each, spread over ``--namespaces`` foreign namespaces
(default 5: `lineage-lab-volume-0` ...; a team's jobs and datasets live in its namespace), each job writing 5
datasets of its own (schema facets, 4-10 fields) and reading 2 of its team's earlier outputs: 200 x 10 x 5 = 10,000
datasets; ``--runs-per-job`` runs each (default 1: START + COMPLETE, with inputs, outputs and schemas). The first
``--orders-teams`` teams (default 10) consume the pipeline's Kafka `orders` topic (their 1st and 6th job read it
under its real identity), as a real team does in a shared Marquez; every other team touches nothing of ours.

Afterwards the volume namespaces are deleted again (Marquez's DELETE /api/v1/namespaces/{ns}, which hides the
namespace with its jobs and datasets), so the shared stack is not left with them; ``--keep`` leaves them.

Timing, medians of ``--runs``:

- verify: ``verify_and_render`` in-process, the code path of `lineage-lab verify` and the main job's verify step
  (the picture goes to a temporary file);
- each asset check definition of ``build_definitions(settings)`` through ``dg.materialize`` (as tests/service do),
  one run each, and all of them in one run; an ephemeral Dagster instance, the stack's outbox read as the checks
  read it;
- the product's checks jobs (``run_asset_checks``: what the main job's "asset checks" step runs;
  ``streaming_lineage_checks``: the 5-minute schedule's) submitted to the running Dagster webserver and run by its
  run launcher and executor (in process for ``streaming_lineage_checks``), as the UI and the schedule run them:
  each step's own duration (Dagster's step stats, one row per check step) and the run's wall time from submission
  to its end (process starts and code loading included: reported, no target);
- one tick of each sensor (they ask for runs of the checks of what they record, evaluated in the runs above):
  ``build_sensor_context`` with the sensor's current cursor, against the real services and, by default, the
  stack's Dagster instance read-only
  (the result is discarded, no cursor moves); the lineage resource is a private outbox that is never drained.

A timed run that raised, a check run that failed or left a planned check without its evaluation, a failed step and
a sensor tick that skipped are never reported as PASS. Every Marquez GET made in this process is counted per
operation (calls and seconds), to tell where the time goes.

    .venv/bin/python benchmarks/lineage_volume.py --runs 3
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime as dt
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import dagster as dg
import requests
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import job_type_job, schema_dataset

from infra.services.dagster import DagsterDev
from infra.settings import StackSettings
from lineage_assets.lineage.events import PRODUCER, iso, run_id_for
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient, MarquezError
from lineage_assets.lineage.outbox import Drainer, Outbox
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.resources import build_resources

NAMESPACE = "lineage-lab-volume"  # the prefix of the foreign namespaces: lineage-lab-volume-0 ...
JOBS_PER_TEAM = 10
OUTPUTS_PER_JOB = 5
INPUTS_PER_JOB = 2
ORDERS_READERS = (0, 5)  # which jobs of an orders-consuming team read the orders topic
#: the synthetic runs' schedule: run n of a job starts n hours after BASE (fixed, so run ids are stable)
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TYPES = ("string", "bigint", "decimal(10,2)", "timestamp", "int", "boolean", "double")
VOLUME_PRODUCER = f"{PRODUCER}/blob/main/benchmarks/lineage_volume.py"
VERIFY_TARGET, CHECK_TARGET, SENSOR_TARGET = 30.0, 10.0, 5.0


# --- the volume ------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class VolumeJob:
    namespace: str  # the team's namespace: its jobs and its datasets
    name: str
    index: int  # position in the plan: offsets the job's start times by that many seconds
    inputs: tuple[str, ...]  # dataset names in the job's namespace
    reads_orders: bool
    outputs: tuple[str, ...]


def namespaces(count: int) -> list[str]:
    return [f"{NAMESPACE}-{n}" for n in range(count)]


def plan(teams: int, orders_teams: int, namespace_count: int = 5) -> list[VolumeJob]:
    """Teams of batch jobs, team t in namespace t mod ``namespace_count``; each job writes OUTPUTS_PER_JOB datasets
    and reads INPUTS_PER_JOB of its team's earlier outputs (the first job of a team reads none); the first
    ``orders_teams`` teams consume Kafka orders."""
    jobs = []
    spaces = namespaces(namespace_count)
    for t in range(teams):
        rng = random.Random(t)
        written: list[str] = []
        for j in range(JOBS_PER_TEAM):
            inputs = tuple(sorted(rng.sample(written, INPUTS_PER_JOB))) if written else ()
            outputs = tuple(f"team{t:03d}.table_{j:02d}_{k}" for k in range(OUTPUTS_PER_JOB))
            reads_orders = t < orders_teams and j in ORDERS_READERS
            name = f"team{t:03d}-job{j:02d}"
            jobs.append(VolumeJob(spaces[t % namespace_count], name, len(jobs), inputs, reads_orders, outputs))
            written.extend(outputs)
    return jobs


def schema(name: str) -> schema_dataset.SchemaDatasetFacet:
    width = 4 + sum(name.encode()) % 7
    return schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name=f"col_{i}", type=TYPES[(i + len(name)) % len(TYPES)])
            for i in range(width)
        ]
    )


def start_of(job: VolumeJob, run_no: int) -> dt.datetime:
    return BASE + dt.timedelta(hours=run_no, seconds=job.index)


def run_id(job: VolumeJob, run_no: int) -> str:
    return run_id_for(job.name, start_of(job, run_no), f"volume-{run_no}")


def run_events(job: VolumeJob, run_no: int, orders: tuple[str, str], start: bool = False) -> list[RunEvent]:
    """The COMPLETE of one run (and its START first with ``start``), each with the job's inputs and outputs
    (schemas on the job's own datasets; the orders topic, owned by the pipeline, without facets). Marquez builds the
    run, the job's edges and the datasets from the COMPLETE alone: the START only doubles the load's time."""
    inputs = [InputDataset(namespace=job.namespace, name=n, facets={"schema": schema(n)}) for n in job.inputs]
    if job.reads_orders:
        inputs.insert(0, InputDataset(namespace=orders[0], name=orders[1]))
    outputs = [OutputDataset(namespace=job.namespace, name=n, facets={"schema": schema(n)}) for n in job.outputs]
    started = start_of(job, run_no)
    rid = run_id(job, run_no)
    return [
        RunEvent(
            eventType=state,
            eventTime=iso(when),
            run=Run(runId=rid),
            job=Job(
                namespace=job.namespace,
                name=job.name,
                facets={
                    "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SPARK", jobType="JOB")
                },
            ),
            inputs=inputs,
            outputs=outputs,
            producer=VOLUME_PRODUCER,
        )
        for state, when in ((RunState.START, started), (RunState.COMPLETE, started + dt.timedelta(minutes=5)))
        if start or state == RunState.COMPLETE
    ]


# --- Marquez -------------------------------------------------------------------------------------------------
def api(url: str, path: str, **params) -> dict:
    resp = requests.get(f"{url}/api/v1/{path}", params=params or None, timeout=120)
    if resp.status_code == 404:
        return {}
    resp.raise_for_status()
    return resp.json()


def completed_runs(url: str, jobs: list[VolumeJob], runs_per_job: int) -> set[str]:
    """The volume's runs Marquez already has COMPLETED (asked per job only in namespaces that exist)."""
    done = set()
    listed = api(url, "namespaces", limit=1000).get("namespaces", [])
    present = {n["name"] for n in listed if not n.get("isHidden")}
    for job in jobs:
        if job.namespace not in present:
            continue
        path = f"namespaces/{quote(job.namespace, safe='')}/jobs/{quote(job.name, safe='')}/runs"
        done |= {
            r["id"] for r in api(url, path, limit=runs_per_job + 50).get("runs", []) if r.get("state") == "COMPLETED"
        }
    return done


def volume_counts(url: str, spaces: list[str]) -> dict[str, int]:
    """Datasets and jobs in the volume's namespaces, and in all of Marquez (totalCount of one-item pages)."""
    counts = {"datasets": 0, "jobs": 0, "all_jobs": 0, "all_datasets": 0, "namespaces": 0}
    for ns in api(url, "namespaces", limit=1000).get("namespaces", []):
        if ns.get("isHidden"):
            continue
        name = quote(ns["name"], safe="")
        datasets = api(url, f"namespaces/{name}/datasets", limit=1).get("totalCount", 0)
        job_count = api(url, f"namespaces/{name}/jobs", limit=1).get("totalCount", 0)
        counts["all_datasets"] += datasets
        counts["all_jobs"] += job_count
        counts["namespaces"] += 1
        if ns["name"] in spaces:
            counts["datasets"] += datasets
            counts["jobs"] += job_count
    return counts


def remove_volume(url: str, spaces: list[str]) -> list[str]:
    """Delete the volume's namespaces from Marquez. Marquez 0.51 deletes softly: the namespace stays listed with
    ``isHidden`` and its jobs and datasets are hidden (404 on GET, gone from listings, search and lineage graphs);
    its API has no hard delete. Returns the volume namespaces still visible afterwards (empty when all went)."""
    for ns in spaces:
        resp = requests.delete(f"{url}/api/v1/namespaces/{quote(ns, safe='')}", timeout=120)
        if resp.status_code not in (200, 204, 404):
            print(f"  DELETE namespace {ns}: HTTP {resp.status_code} {resp.text[:200]}", flush=True)
    listed = api(url, "namespaces", limit=1000).get("namespaces", [])
    return sorted({n["name"] for n in listed if not n.get("isHidden")} & set(spaces))


def drain(events: list[RunEvent], url: str, workers: int, directory: Path, label: str) -> tuple[float, float]:
    """Enqueue ``events`` into a fresh private outbox and drain it with ``workers``; (enqueue s, drain s)."""
    outbox = Outbox(directory / f"volume-{label}.sqlite")
    t0 = time.perf_counter()
    for event in events:
        outbox.enqueue(event)
    enqueued = time.perf_counter() - t0
    drainer = Drainer(outbox, url, workers=workers, timeout=30.0)
    t0 = time.perf_counter()
    try:
        while not drainer.flush(timeout=60):
            c = outbox.counts()
            rate = c.sent / (time.perf_counter() - t0)
            print(f"  {label}: {c.sent}/{len(events)} sent, {rate:.1f} events/s, {c.rejected} rejected", flush=True)
    finally:
        drainer.stop()
    drained = time.perf_counter() - t0
    dead = outbox.dead_letters()
    if dead:
        raise SystemExit(f"Marquez rejected {len(dead)} events, e.g. {dead[0]}")
    return enqueued, drained


def load(url: str, orders: tuple[str, str], args: argparse.Namespace, directory: Path) -> None:
    jobs = plan(args.teams, args.orders_teams, args.namespaces)
    done = set() if args.reload else completed_runs(url, jobs, args.runs_per_job)
    # run-major order: consecutive runs in the outbox belong to different jobs, so the drainer's parallel sends
    # do not all update the same job's rows in Marquez
    todo = [(job, n) for n in range(args.runs_per_job) for job in jobs if run_id(job, n) not in done]
    total = len(jobs) * args.runs_per_job
    if not todo:
        print(f"load: all {total} runs already in Marquez ({NAMESPACE}-*); --reload sends them again")
        return
    per_run = 2 if args.start_events else 1
    print(f"load: {len(todo)} of {total} runs to send ({per_run * len(todo)} events), {len(jobs)} jobs", flush=True)
    rates: dict[int, float] = {}
    segment = args.calibration_runs
    position = 0
    for workers in args.calibrate:
        if position + segment > len(todo):
            break
        events = [
            e for job, n in todo[position : position + segment] for e in run_events(job, n, orders, args.start_events)
        ]
        enq, took = drain(events, url, workers, directory, f"calibrate-{workers}")
        rates[workers] = len(events) / took
        print(f"calibrate: {workers:>2} workers {rates[workers]:6.1f} events/s ({len(events)} events)", flush=True)
        position += segment
    best = max(rates, key=rates.get) if rates else args.workers
    rest = todo[position:]
    if rest:
        events = [e for job, n in rest for e in run_events(job, n, orders, args.start_events)]
        enq, took = drain(events, url, best, directory, f"load-{best}")
        print(
            f"load: {len(events)} events with {best} workers in {took:.0f} s: {len(events) / took:.1f} events/s "
            f"(enqueue {len(events) / enq:.0f} events/s)",
            flush=True,
        )


# --- timing ----------------------------------------------------------------------------------------------------
class MarquezCalls:
    """Counts MarquezClient GETs per operation (path with names replaced) while active."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.seconds: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        original = MarquezClient._get

        def counted(client, path, **params):
            t0 = time.perf_counter()
            try:
                return original(client, path, **params)
            finally:
                parts = path.split("/")
                op = "/".join(p if p in {"namespaces", "datasets", "jobs", "runs", "versions"} else "*" for p in parts)
                op = f"{op}?depth={params['depth']}" if "depth" in params else op
                self.calls[op] += 1
                self.seconds[op] += time.perf_counter() - t0

        MarquezClient._get = counted
        try:
            yield
        finally:
            MarquezClient._get = original

    def summary(self, runs: int) -> str:
        return ", ".join(
            f"{op} {self.calls[op] // runs}x {self.seconds[op] / runs:.2f}s" for op, _ in self.seconds.most_common()
        )


@dataclasses.dataclass
class Row:
    operation: str
    seconds: list[float]
    target: float | None  # None: reported, no target (INFO when every run did its work)
    note: str = ""
    marquez: str = ""
    #: timed runs that raised or did not do what was timed (a check without its evaluation, a step that failed)
    errors: int = 0
    #: timed sensor ticks that skipped (then only the skip was timed, not the sensor's work)
    skipped: int = 0

    def verdict(self) -> str:
        """PASS only when every timed run did its work and the slowest is within the target."""
        if self.errors:
            return "ERROR"
        if self.skipped:
            return "SKIPPED"
        if not self.seconds:
            return "ERROR"
        if self.target is None:
            return "INFO"
        return "PASS" if max(self.seconds) <= self.target else "FAIL"


@dataclasses.dataclass
class Timed:
    samples: list[float]
    results: list  # one per run that returned (None for a run that raised)
    errors: collections.Counter[str]
    calls: MarquezCalls

    @property
    def last(self):
        return next((r for r in reversed(self.results) if r is not None), None)


def timed(fn, runs: int) -> Timed:
    """Each run timed, its result kept; a run that raises is timed too, counted by exception and printed once."""
    out = Timed([], [], collections.Counter(), MarquezCalls())
    with out.calls.active():
        for _ in range(runs):
            t0 = time.perf_counter()
            try:
                out.results.append(fn())
            except Exception as exc:  # counted: the row then reports ERROR, never PASS
                if not out.errors:
                    print(f"  error: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                out.errors[type(exc).__name__] += 1
                out.results.append(None)
            out.samples.append(time.perf_counter() - t0)
    return out


def error_note(errors: collections.Counter[str]) -> str:
    return f"; errors: {dict(errors)}" if errors else ""


def time_verify(settings: StackSettings, runs: int, directory: Path) -> Row:
    from lineage_assets.checks.drift_report import verify_and_render

    t = timed(lambda: verify_and_render(settings, directory / "graph.html"), runs)
    report = t.last[0] if t.last else None
    note = (
        "no result"
        if report is None
        else "no drift"
        if report.ok
        else f"{len(report.drift)} difference(s): {report.drift[:3]}"
    )
    errors = sum(t.errors.values())
    return Row(
        "verify (lineage-lab verify)",
        t.samples,
        VERIFY_TARGET,
        note + error_note(t.errors),
        t.calls.summary(runs),
        errors=errors,
    )


def time_checks(settings: StackSettings, runs: int) -> list[Row]:
    from lineage_assets.definitions import build_definitions

    defs = build_definitions(settings)
    assets, checks = list(defs.assets), list(defs.asset_checks)
    resources = build_resources(settings)  # the stack's outbox: the checks only read it, as they do in the stack

    def run(selected) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [*assets, *checks],
            selection=dg.AssetSelection.checks(*selected),
            resources=resources,
            instance=dg.DagsterInstance.ephemeral(),
            raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        )

    def row(name: str, keys) -> Row:
        """A timed run counts as an error unless it succeeded and evaluated every selected check exactly once (a
        check whose step errored leaves no evaluation, and raise_on_error=False would hide it)."""
        t = timed(lambda: run(keys), runs)
        errors = sum(t.errors.values())
        problems: collections.Counter[str] = collections.Counter(t.errors)
        for result in t.results:
            if result is None:
                continue
            evaluated = [dg.AssetCheckKey(e.asset_key, e.check_name) for e in result.get_asset_check_evaluations()]
            failures = [e for e in result.all_events if e.is_step_failure]
            if not result.success or failures or sorted(evaluated, key=str) != sorted(keys, key=str):
                errors += 1
                problems["run failed" if failures or not result.success else "evaluations missing"] += 1
        last = t.last
        evaluations = last.get_asset_check_evaluations() if last else []
        failed = [f"{e.check_name}: {e.description}" for e in evaluations if not e.passed]
        note = f"{len(evaluations) - len(failed)}/{len(evaluations)} passed" + (f"; {failed[:2]}" if failed else "")
        return Row(name, t.samples, CHECK_TARGET, note + error_note(problems), t.calls.summary(runs), errors=errors)

    rows = [row(f"check {check.node_def.name}", list(check.check_keys)) for check in checks]
    every = [key for check in checks for key in check.check_keys]
    # every check definition's step one after the other (in-process executor): their sum, no target of its own
    rows.append(dataclasses.replace(row(f"all {len(every)} checks, one run (sum of steps)", every), target=None))
    return rows


def time_check_jobs(settings: StackSettings, runs: int, jobs: tuple[str, ...]) -> list[Row]:
    """The checks jobs as the product runs them: submitted to the running Dagster webserver (GraphQL), run by its
    run launcher with the multiprocess executor. Per job: the run's wall time (submission to end) and each step's
    own duration from Dagster's step stats. A run counts as an error unless it succeeded, every step succeeded and
    every check it planned has its evaluation in that run."""
    from urllib.parse import urlsplit

    from dagster_graphql import DagsterGraphQLClient

    url = urlsplit(settings.dagster_url)
    client = DagsterGraphQLClient(url.hostname or "", port_number=url.port, timeout=60)
    rows: list[Row] = []
    with dg.DagsterInstance.from_config(str(DagsterDev(settings).dagster_home)) as instance:
        for job in jobs:
            walls: list[float] = []
            ran: list[float] = []  # the run record's start to end: the run worker, without the queue
            steps: dict[str, list[float]] = collections.defaultdict(list)
            step_errors: collections.Counter[str] = collections.Counter()
            problems: collections.Counter[str] = collections.Counter()
            note = ""
            for _ in range(runs):
                t0 = time.perf_counter()
                try:
                    run_id = client.submit_job_execution(job)
                except Exception as exc:  # counted: the row then reports ERROR
                    problems[f"submit: {type(exc).__name__}"] += 1
                    print(f"  error: {job} not submitted: {str(exc)[:300]}", flush=True)
                    continue
                status = None
                while time.perf_counter() - t0 < 900:
                    status = instance.get_run_by_id(run_id).status
                    if status in (
                        dg.DagsterRunStatus.SUCCESS,
                        dg.DagsterRunStatus.FAILURE,
                        dg.DagsterRunStatus.CANCELED,
                    ):
                        break
                    time.sleep(0.2)
                walls.append(time.perf_counter() - t0)
                record = instance.get_run_record_by_id(run_id)
                if record and record.start_time and record.end_time:
                    ran.append(record.end_time - record.start_time)
                if status != dg.DagsterRunStatus.SUCCESS:
                    problems[f"run {status.value if status else 'unknown'}"] += 1
                    print(f"  error: {job} run {run_id} ended {status}", flush=True)
                planned = check_keys(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED)
                evaluated = check_keys(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
                if not planned or sorted(evaluated) != sorted(planned):
                    problems["evaluations missing"] += 1
                    print(
                        f"  error: {job} run {run_id}: {len(planned)} planned, {len(evaluated)} evaluated", flush=True
                    )
                for stat in instance.get_run_step_stats(run_id):
                    if stat.start_time is not None and stat.end_time is not None:
                        steps[stat.step_key].append(stat.end_time - stat.start_time)
                    if stat.status is None or stat.status.value != "SUCCESS":
                        step_errors[stat.step_key] += 1
                note = f"run {run_id[:8]}: {len(evaluated)}/{len(planned)} planned checks evaluated"
            rows.append(
                Row(
                    f"{job} run (wall, submit to end)",
                    walls,
                    None,
                    note + error_note(problems),
                    errors=sum(problems.values()) + (runs - len(walls)),
                )
            )
            rows.append(
                Row(f"{job} run (start to end)", ran, None, "", errors=sum(problems.values()) + (runs - len(ran)))
            )
            for step, seconds in sorted(steps.items()):
                failed = step_errors[step]
                rows.append(
                    Row(
                        f"  {job} step {step}",
                        seconds,
                        CHECK_TARGET,
                        f"{failed} step(s) not SUCCESS" if failed else "",
                        errors=failed + (runs - len(seconds)),
                    )
                )
    return rows


def check_keys(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> list[str]:
    records = instance.get_records_for_run(run_id, of_type=kind, limit=10_000).records
    return [
        f"{r.event_log_entry.dagster_event.event_specific_data.asset_key.to_user_string()}:"
        f"{r.event_log_entry.dagster_event.event_specific_data.check_name}"
        for r in records
    ]


def time_sensors(settings: StackSettings, runs: int, directory: Path, which: str) -> list[Row]:
    from dagster._core.scheduler.instigation import InstigatorType

    from lineage_assets.definitions import build_definitions

    defs = build_definitions(settings)
    resources = {
        **build_resources(settings),
        "lineage": LineageResource(
            outbox_path=str(directory / "sensor-outbox.sqlite"), backend_url=settings.marquez_url
        ),
    }
    with contextlib.ExitStack() as stack:
        if which == "stack":
            instance = stack.enter_context(dg.DagsterInstance.from_config(str(DagsterDev(settings).dagster_home)))
            cursors = {
                s.name: s.instigator_data.cursor if s.instigator_data else None
                for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
            }
        else:
            instance = stack.enter_context(dg.DagsterInstance.ephemeral())
            cursors = {}
        rows = []
        repository = defs.get_repository_def()
        for sensor in defs.sensors:
            # only the resources the sensor asks for, as the daemon initialises them (not Spark for every tick)
            needed = {k: v for k, v in resources.items() if k in sensor.required_resource_keys}

            def tick(sensor=sensor, needed=needed):
                # the repository: a sensor that requests partitioned runs (the new-orders sensor) needs it
                with dg.build_sensor_context(
                    instance=instance, cursor=cursors.get(sensor.name), resources=needed, repository_def=repository
                ) as ctx:
                    if isinstance(sensor, dg.AssetSensorDefinition):
                        # calling an asset sensor with resources fails in Dagster 1.13 (the resources reach its
                        # wrapped function as keyword arguments); the daemon's path evaluates it
                        data = sensor.evaluate_tick(ctx)
                        if data.run_requests:
                            return dg.SensorResult(run_requests=data.run_requests)
                        return dg.SkipReason(data.skip_message or "(no run requests)")
                    return sensor(ctx)

            t = timed(tick, runs)
            skipped = sum(1 for r in t.results if r is not None and skip_message(r) is not None)
            result = t.last
            if result is None:
                note = "no result"
            elif skip_message(result) is not None:
                note = f"skip: {skip_message(result)}"
            else:
                note = f"{len(result.asset_events or [])} asset events, {len(result.run_requests or [])} run requests"
            rows.append(
                Row(
                    f"sensor tick {sensor.name}",
                    t.samples,
                    SENSOR_TARGET,
                    (note[:90] + error_note(t.errors)),
                    t.calls.summary(runs),
                    errors=sum(t.errors.values()),
                    skipped=skipped,
                )
            )
    return rows


def skip_message(result) -> str | None:
    """Why a tick skipped, or None when it did work: a SkipReason, a SensorResult with nothing in it but a skip
    reason, or nothing at all."""
    if result is None or isinstance(result, dg.SkipReason):
        return getattr(result, "skip_message", None) or "(no result)"
    if isinstance(result, dg.SensorResult):
        if not (result.asset_events or result.run_requests or result.dynamic_partitions_requests):
            return result.skip_reason.skip_message if result.skip_reason else "(empty result)"
        return None
    if isinstance(result, list | tuple) and not result:
        return "(no run requests)"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="timed repetitions of each operation (medians)")
    parser.add_argument(
        "--teams", type=int, default=200, help=f"{JOBS_PER_TEAM} jobs, {JOBS_PER_TEAM * OUTPUTS_PER_JOB} datasets each"
    )
    parser.add_argument("--namespaces", type=int, default=5, help="foreign namespaces the teams are spread over")
    parser.add_argument("--runs-per-job", type=int, default=1)
    parser.add_argument("--start-events", action="store_true", help="send each run's START too, not only COMPLETE")
    parser.add_argument("--orders-teams", type=int, default=10, help="teams whose jobs read the Kafka orders topic")
    parser.add_argument("--reload", action="store_true", help="send every event again, even if Marquez has them")
    parser.add_argument("--no-load", action="store_true", help="only time, with whatever Marquez holds")
    parser.add_argument("--keep", action="store_true", help="leave the volume's namespaces in Marquez afterwards")
    parser.add_argument(
        "--calibrate",
        type=lambda s: [int(w) for w in s.split(",") if w],
        default=[],
        help="worker counts to drain the first segments with (e.g. 2,4,8,16); the rest goes with the fastest",
    )
    parser.add_argument("--calibration-runs", type=int, default=400, help="runs (2 events each) per segment")
    parser.add_argument("--workers", type=int, default=16, help="drain workers when nothing is calibrated")
    parser.add_argument("--sensor-instance", choices=("stack", "ephemeral"), default="stack")
    parser.add_argument(
        "--jobs",
        type=lambda s: tuple(j for j in s.split(",") if j),
        default=("streaming_lineage_checks", "run_asset_checks"),
        help="checks jobs to submit to the running Dagster (empty: none)",
    )
    args = parser.parse_args()

    settings = StackSettings.from_env()
    url = settings.marquez_url
    try:
        MarquezClient(url).namespaces()
    except MarquezError as exc:
        raise SystemExit(f"{exc} (this benchmark needs the running stack: lineage-lab stack up)") from exc
    orders = Pipeline.from_settings(settings).dataset("kafka_orders")
    spaces = namespaces(args.namespaces)

    try:
        with tempfile.TemporaryDirectory(prefix="lineage-volume-") as tmp:
            if not args.no_load:
                t0 = time.perf_counter()
                load(url, (orders.namespace, orders.name), args, Path(tmp))
                print(f"load took {time.perf_counter() - t0:.0f} s", flush=True)
            counts = volume_counts(url, spaces)
            print(
                f"\nMarquez {url}: the {len(spaces)} volume namespaces hold {counts['datasets']} datasets, "
                f"{counts['jobs']} jobs; all {counts['namespaces']} namespaces: {counts['all_datasets']} datasets, "
                f"{counts['all_jobs']} jobs",
                flush=True,
            )
            rows = [time_verify(settings, args.runs, Path(tmp))]
            print(f"timed {rows[-1].operation}", flush=True)
            rows += time_checks(settings, args.runs)
            print("timed the asset checks in-process", flush=True)
            rows += time_check_jobs(settings, args.runs, args.jobs)
            print("timed the checks jobs on the running Dagster", flush=True)
            rows += time_sensors(settings, args.runs, Path(tmp), args.sensor_instance)
    finally:
        if not args.keep:
            left = remove_volume(url, spaces)
            print(
                f"\ndeleted the volume namespaces in Marquez (soft: hidden); still visible: {left or 'none'}",
                flush=True,
            )

    print(
        f"\nmedians of {args.runs} run(s), PASS when every run did its work (ERROR: a run raised, or a check run "
        "failed, a step failed or a planned check has no evaluation; SKIPPED: a sensor tick skipped, so its work "
        "was not timed) and the slowest is within the target; INFO: no target; sensors on the "
        f"{args.sensor_instance} Dagster instance (read-only)"
    )
    print(f"{'operation':<60} {'median s':>9} {'max s':>7} {'target':>7}  result")
    for row in rows:
        med = statistics.median(row.seconds) if row.seconds else float("nan")
        worst = max(row.seconds) if row.seconds else float("nan")
        target = f"{row.target:>6.0f}s" if row.target is not None else f"{'-':>7}"
        counts_note = f" ({row.errors} errors)" if row.errors else f" ({row.skipped} skipped)" if row.skipped else ""
        print(f"{row.operation:<60} {med:>9.2f} {worst:>7.2f} {target}  {row.verdict()}{counts_note}  {row.note}")
    errors = sum(row.errors for row in rows)
    print(
        f"errors: {errors} timed run(s) raised or did not do their work; skipped ticks: {sum(r.skipped for r in rows)}"
    )
    print("\nMarquez GETs per operation (per run: calls, seconds; made in this process)")
    for row in rows:
        if row.marquez:
            print(f"  {row.operation}: {row.marquez}")


if __name__ == "__main__":
    main()
