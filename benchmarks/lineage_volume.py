"""Lineage at volume (issue 15): with 1,000 datasets and 10,000 runs of other teams' jobs in Marquez, how long do
`lineage-lab verify`, every asset check and one tick of every sensor take? Targets: verify and each asset check
<= 30 s, a sensor tick <= 5 s.

Load. Synthetic lineage goes in the way the project's own does, through the outbox (``Outbox.enqueue`` then a
``Drainer.flush``), so the load also measures the drainer's throughput into a Marquez that grows. The outbox is a
private file in a temporary directory, not the stack's: the stack's lineage-drainer would deliver it at the same
time (two drainers, one figure we could not attribute) and its backlog would show in every check's
``lineage/backlog`` and in `lineage-lab lineage outbox` for the engineers sharing the stack.

The volume: ``--teams`` teams (default 20) of 10 batch jobs each in the job and dataset namespace
`lineage-lab-volume`, each job writing 5 datasets of its own (schema facets, 4-10 fields) and reading 2 of its
team's earlier outputs; ``--runs-per-job`` runs each (default 50: START + COMPLETE, both with inputs, outputs and
schemas, like the project's events). Half the teams (``--orders-teams``) are consumers of the pipeline's Kafka
`orders` topic (their 1st and 6th job read it under its real identity, from ``identity.Pipeline``), which is what
a real team sees in a shared Marquez: the lineage walks of verify and the checks start at `orders` and reach every
job and dataset of those teams. The foreign readers name `orders` by identity only, without facets: its schema and
data source are the pipeline's to report.

Run ids and event times are derived from (job, run number), so the load is resumable and idempotent: runs Marquez
already has COMPLETED are not sent again (``--reload`` sends every event again). The first segments of the load
are drained with different worker counts (``--calibrate``) and the rest with the fastest of them.

Timing, medians of ``--runs``:

- verify: ``verify_and_render`` in-process, the code path of `lineage-lab verify` (the picture goes to a
  temporary file, not over the stack's);
- each asset check definition of ``definitions.defs`` through ``dg.materialize`` (as tests/service do), one run
  each, and all of them in one run (what the UI's "execute all" and the streaming-checks schedule do); an
  ephemeral Dagster instance, the stack's outbox read as the checks read it (they never emit);
- one tick of each sensor: ``build_sensor_context`` with the sensor's current cursor, against the real services
  and, by default, the stack's Dagster instance read-only (the sensors then see the real materializations; the
  result is discarded, nothing is written to the instance and no cursor moves); ``--sensor-instance ephemeral``
  for a throwaway instance. The lineage resource is a private outbox that is never drained, so a tick sends
  nothing to Marquez.

Every Marquez GET is counted per operation (calls and seconds), to tell where the time goes.

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
from lineage_assets.lineage.marquez import MarquezClient, MarquezError
from lineage_assets.lineage.outbox import Drainer, Outbox
from lineage_assets.resources import LineageResource, build_resources

NAMESPACE = "lineage-lab-volume"
JOBS_PER_TEAM = 10
OUTPUTS_PER_JOB = 5
INPUTS_PER_JOB = 2
ORDERS_READERS = (0, 5)  # which jobs of an orders-consuming team read the orders topic
#: the synthetic runs' schedule: run n of a job starts n hours after BASE (fixed, so run ids are stable)
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TYPES = ("string", "bigint", "decimal(10,2)", "timestamp", "int", "boolean", "double")
VOLUME_PRODUCER = f"{PRODUCER}/blob/main/benchmarks/lineage_volume.py"
VERIFY_TARGET, CHECK_TARGET, SENSOR_TARGET = 30.0, 30.0, 5.0


# --- the volume ------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class VolumeJob:
    name: str
    index: int  # position in the plan: offsets the job's start times by that many seconds
    inputs: tuple[str, ...]  # dataset names in NAMESPACE
    reads_orders: bool
    outputs: tuple[str, ...]


def plan(teams: int, orders_teams: int) -> list[VolumeJob]:
    """Teams of batch jobs; each job writes OUTPUTS_PER_JOB datasets and reads INPUTS_PER_JOB of its team's
    earlier outputs (the first job of a team reads none); the first ``orders_teams`` teams consume Kafka orders."""
    jobs = []
    for t in range(teams):
        rng = random.Random(t)
        written: list[str] = []
        for j in range(JOBS_PER_TEAM):
            inputs = tuple(sorted(rng.sample(written, INPUTS_PER_JOB))) if written else ()
            outputs = tuple(f"team{t:02d}.table_{j:02d}_{k}" for k in range(OUTPUTS_PER_JOB))
            reads_orders = t < orders_teams and j in ORDERS_READERS
            jobs.append(VolumeJob(f"team{t:02d}-job{j:02d}", len(jobs), inputs, reads_orders, outputs))
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


def run_events(job: VolumeJob, run_no: int, orders: tuple[str, str]) -> list[RunEvent]:
    """START and COMPLETE of one run, each with the job's inputs and outputs (schemas on the job's own datasets;
    the orders topic, owned by the pipeline, without facets)."""
    inputs = [InputDataset(namespace=NAMESPACE, name=n, facets={"schema": schema(n)}) for n in job.inputs]
    if job.reads_orders:
        inputs.insert(0, InputDataset(namespace=orders[0], name=orders[1]))
    outputs = [OutputDataset(namespace=NAMESPACE, name=n, facets={"schema": schema(n)}) for n in job.outputs]
    started = start_of(job, run_no)
    rid = run_id(job, run_no)
    return [
        RunEvent(
            eventType=state,
            eventTime=iso(when),
            run=Run(runId=rid),
            job=Job(
                namespace=NAMESPACE,
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
    ]


# --- Marquez -------------------------------------------------------------------------------------------------
def api(url: str, path: str, **params) -> dict:
    resp = requests.get(f"{url}/api/v1/{path}", params=params or None, timeout=120)
    if resp.status_code == 404:
        return {}
    resp.raise_for_status()
    return resp.json()


def completed_runs(url: str, jobs: list[VolumeJob], runs_per_job: int) -> set[str]:
    done = set()
    for job in jobs:
        page = api(url, f"namespaces/{NAMESPACE}/jobs/{quote(job.name, safe='')}/runs", limit=runs_per_job + 50)
        done |= {r["id"] for r in page.get("runs", []) if r.get("state") == "COMPLETED"}
    return done


def volume_counts(url: str, jobs: list[VolumeJob]) -> dict[str, int]:
    """Datasets, jobs and runs in NAMESPACE, and jobs and datasets in all of Marquez. Only totalCount of one-item
    pages: Marquez lists a job with its latest runs and their dataset versions (0.4 s per job at this volume)."""
    counts = {"datasets": 0, "jobs": 0, "runs": 0, "all_jobs": 0, "all_datasets": 0}
    for ns in api(url, "namespaces", limit=1000).get("namespaces", []):
        name = quote(ns["name"], safe="")
        datasets = api(url, f"namespaces/{name}/datasets", limit=1).get("totalCount", 0)
        job_count = api(url, f"namespaces/{name}/jobs", limit=1).get("totalCount", 0)
        counts["all_datasets"] += datasets
        counts["all_jobs"] += job_count
        if ns["name"] == NAMESPACE:
            counts["datasets"], counts["jobs"] = datasets, job_count
            for job in jobs:
                path = f"namespaces/{name}/jobs/{quote(job.name, safe='')}/runs"
                counts["runs"] += api(url, path, limit=1).get("totalCount", 0)
    return counts


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
    jobs = plan(args.teams, args.orders_teams)
    done = set() if args.reload else completed_runs(url, jobs, args.runs_per_job)
    # run-major order: consecutive runs in the outbox belong to different jobs, so the drainer's parallel sends
    # do not all update the same job's rows in Marquez
    todo = [(job, n) for n in range(args.runs_per_job) for job in jobs if run_id(job, n) not in done]
    total = len(jobs) * args.runs_per_job
    if not todo:
        print(f"load: all {total} runs already in Marquez (namespace {NAMESPACE}); --reload sends them again")
        return
    print(f"load: {len(todo)} of {total} runs to send ({2 * len(todo)} events), {len(jobs)} jobs", flush=True)
    rates: dict[int, float] = {}
    segment = args.calibration_runs
    position = 0
    for workers in args.calibrate:
        if position + segment > len(todo):
            break
        events = [e for job, n in todo[position : position + segment] for e in run_events(job, n, orders)]
        enq, took = drain(events, url, workers, directory, f"calibrate-{workers}")
        rates[workers] = len(events) / took
        print(f"calibrate: {workers:>2} workers {rates[workers]:6.1f} events/s ({len(events)} events)", flush=True)
        position += segment
    best = max(rates, key=rates.get) if rates else args.workers
    rest = todo[position:]
    if rest:
        events = [e for job, n in rest for e in run_events(job, n, orders)]
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
    target: float
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
    from lineage_assets.checks.verify import verify_and_render

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
    from lineage_assets.definitions import defs

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
    rows.append(row(f"all {len(every)} checks, one run", every))
    return rows


def time_sensors(settings: StackSettings, runs: int, directory: Path, which: str) -> list[Row]:
    from dagster._core.scheduler.instigation import InstigatorType

    from lineage_assets.definitions import defs

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
        for sensor in defs.sensors:
            # only the resources the sensor asks for, as the daemon initialises them (not Spark for every tick)
            needed = {k: v for k, v in resources.items() if k in sensor.required_resource_keys}

            def tick(sensor=sensor, needed=needed):
                with dg.build_sensor_context(
                    instance=instance, cursor=cursors.get(sensor.name), resources=needed
                ) as ctx:
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
        "--teams", type=int, default=20, help=f"{JOBS_PER_TEAM} jobs, {JOBS_PER_TEAM * 5} datasets each"
    )
    parser.add_argument("--runs-per-job", type=int, default=50)
    parser.add_argument("--orders-teams", type=int, default=10, help="teams whose jobs read the Kafka orders topic")
    parser.add_argument("--reload", action="store_true", help="send every event again, even if Marquez has them")
    parser.add_argument("--no-load", action="store_true", help="only time, with whatever Marquez holds")
    parser.add_argument(
        "--calibrate",
        type=lambda s: [int(w) for w in s.split(",") if w],
        default=[2, 4, 8, 16],
        help="worker counts to drain the first segments with; the rest goes with the fastest",
    )
    parser.add_argument("--calibration-runs", type=int, default=400, help="runs (2 events each) per segment")
    parser.add_argument("--workers", type=int, default=None, help="drain workers when nothing is calibrated")
    parser.add_argument("--sensor-instance", choices=("stack", "ephemeral"), default="stack")
    args = parser.parse_args()

    settings = StackSettings.from_env()
    url = settings.marquez_url
    args.workers = args.workers or settings.lineage_drain_workers
    try:
        MarquezClient(url).namespaces()
    except MarquezError as exc:
        raise SystemExit(f"{exc} (this benchmark needs the running stack: lineage-lab stack up)") from exc
    orders = Pipeline.from_settings(settings).dataset("kafka_orders")

    with tempfile.TemporaryDirectory(prefix="lineage-volume-") as tmp:
        if not args.no_load:
            load(url, (orders.namespace, orders.name), args, Path(tmp))
        counts = volume_counts(url, plan(args.teams, args.orders_teams))
        print(
            f"\nMarquez {url}: namespace {NAMESPACE} holds {counts['datasets']} datasets, {counts['jobs']} jobs, "
            f"{counts['runs']} runs; all namespaces: {counts['all_datasets']} datasets, {counts['all_jobs']} jobs",
            flush=True,
        )
        rows = [time_verify(settings, args.runs, Path(tmp))]
        print(f"timed {rows[-1].operation}", flush=True)
        rows += time_checks(settings, args.runs)
        print("timed the asset checks", flush=True)
        rows += time_sensors(settings, args.runs, Path(tmp), args.sensor_instance)

    print(
        f"\nmedians of {args.runs} run(s), PASS when every run did its work (ERROR: a run raised, or a check run "
        "failed or missed an evaluation; SKIPPED: a sensor tick skipped, so its work was not timed) and the slowest "
        f"is within the target; sensors on the {args.sensor_instance} Dagster instance (read-only)"
    )
    print(f"{'operation':<52} {'median s':>9} {'max s':>7} {'target':>7}  result")
    for row in rows:
        med, worst = statistics.median(row.seconds), max(row.seconds)
        counts = f" ({row.errors} errors)" if row.errors else f" ({row.skipped} skipped)" if row.skipped else ""
        print(f"{row.operation:<52} {med:>9.2f} {worst:>7.2f} {row.target:>6.0f}s  {row.verdict()}{counts}  {row.note}")
    errors = sum(row.errors for row in rows)
    print(
        f"errors: {errors} timed run(s) raised or did not do their work; skipped ticks: {sum(r.skipped for r in rows)}"
    )
    print("\nMarquez GETs per operation (per run: calls, seconds)")
    for row in rows:
        if row.marquez:
            print(f"  {row.operation}: {row.marquez}")


if __name__ == "__main__":
    main()
