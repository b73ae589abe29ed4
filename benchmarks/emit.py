"""Lineage delivery into the real Marquez of the running stack: the outbox's drainer (runs in parallel, each in
order) next to the plain openlineage-python HTTP transport (one event after another, inline), same events, same
Marquez; and the emit call's latency with Marquez down (nothing listening on its port), ours and the plain one.

Events belong to jobs in the namespace `lineage-lab-bench` (runs of START, RUNNING, COMPLETE), so they never touch
the pipeline's own jobs. Rounds rotate the contenders' order; medians are printed. With Marquez down the outbox
must hold every event emitted (checked), and every failed call is counted and printed.

    .venv/bin/python benchmarks/emit.py --runs 100 --rounds 3
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import multiprocessing
import socket
import statistics
import tempfile
import time
from pathlib import Path

from openlineage.client import OpenLineageClient
from openlineage.client.transport.http import HttpConfig, HttpTransport
from openlineage.client.uuid import generate_new_uuid

from infra.settings import StackSettings
from lineage_assets.lineage.events import EventBuilder, RunState
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient, MarquezError
from lineage_assets.lineage.outbox import Drainer, LineageEmitter, Outbox

NAMESPACE = "lineage-lab-bench"
JOBS = ("iceberg-ingestion", "orders-s3-sink", "supplier-stats")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: int) -> float | None:
    """The q-th percentile, or None when there are too few samples for it to mean anything (a p99 wants at least
    100 samples, a p90 at least 10)."""
    if not values or len(values) < 100 / (100 - q):
        return None
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def ms(value: float | None, digits: int) -> str:
    return f"{value:>8.{digits}f}ms" if value is not None else f"{'n/a':>10}"


def runs(builder: EventBuilder, count: int) -> list:
    """``count`` runs of START, RUNNING, COMPLETE, run after run (what a burst of finished work looks like)."""
    out = []
    now = dt.datetime.now(dt.UTC)
    for i in range(count):
        run_id = str(generate_new_uuid())
        for step, state in enumerate((RunState.START, RunState.RUNNING, RunState.COMPLETE)):
            when = now + dt.timedelta(milliseconds=3 * i + step)
            out.append(builder.event(JOBS[i % len(JOBS)], state, run_id, event_time=when))
    return out


def drain_rate(events: list, url: str, workers: int, tmp: Path) -> float:
    """Events/s from the first enqueue (which serializes the event, as the plain client's emit does) to the last
    event delivered: the same work the plain transport is timed for."""
    path = tmp / f"outbox-{workers}-{time.monotonic_ns()}.sqlite"
    outbox = Outbox(path)
    drainer = Drainer(outbox, url, workers=workers)
    t0 = time.perf_counter()
    for event in events:
        outbox.enqueue(event)
    try:
        if not drainer.flush(timeout=600):
            raise SystemExit(f"the drainer did not deliver everything: {outbox.counts()}")
    finally:
        drainer.stop()
    elapsed = time.perf_counter() - t0
    counts = outbox.counts()
    if counts.rejected:
        raise SystemExit(f"Marquez rejected {counts.rejected} events: {outbox.dead_letters()[:1]}")
    if counts.sent != len(events):
        raise SystemExit(f"the drainer sent {counts.sent} of {len(events)} events: {counts}")
    return len(events) / elapsed


def plain_rate(events: list, url: str) -> float:
    client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, timeout=10.0)))
    t0 = time.perf_counter()
    for event in events:
        client.emit(event)
    return len(events) / (time.perf_counter() - t0)


def timed_calls(fn, items) -> tuple[list[float], collections.Counter[str]]:
    """Milliseconds per call, and the calls that raised, by exception type (each call is timed either way: what a
    caller waits for is the point)."""
    samples = []
    failures: collections.Counter[str] = collections.Counter()
    for item in items:
        t0 = time.perf_counter()
        try:
            fn(item)
        except Exception as exc:  # counted and printed: the plain transport raises when Marquez is down
            failures[type(exc).__name__] += 1
        samples.append((time.perf_counter() - t0) * 1000)
    return samples, failures


def _drain_forever(path: str, url: str) -> None:
    LineageEmitter(Path(path), url).run_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100, help="runs per round (3 events each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--down-events", type=int, default=2000, help="emit calls timed with Marquez down")
    parser.add_argument(
        "--plain-down-events",
        type=int,
        default=10,
        help="the plain transport blocks about 9 s a call (its retries): 10 gives a p90, 100 a p99",
    )
    args = parser.parse_args()

    settings = StackSettings.from_env()
    url = settings.marquez_url
    try:
        MarquezClient(url).namespaces()
    except MarquezError as exc:
        raise SystemExit(f"{exc} (this benchmark needs the running stack: lineage-lab stack up)") from exc
    builder = EventBuilder(Pipeline.from_settings(dataclasses.replace(settings, openlineage_namespace=NAMESPACE)))
    workers = settings.lineage_drain_workers
    rates: dict[str, list[float]] = {"plain": [], "drain-1": [], f"drain-{workers}": []}
    with tempfile.TemporaryDirectory() as tmp:
        contenders = {
            "plain": lambda: plain_rate(runs(builder, args.runs), url),
            "drain-1": lambda: drain_rate(runs(builder, args.runs), url, 1, Path(tmp)),
            f"drain-{workers}": lambda: drain_rate(runs(builder, args.runs), url, workers, Path(tmp)),
        }
        for round_no in range(1, args.rounds + 1):
            order = list(contenders)
            # each contender goes first, in the middle and last in turn (Marquez warms up, its tables grow)
            shift = (round_no - 1) % len(order)
            for name in order[shift:] + order[:shift]:
                rates[name].append(contenders[name]())
            print(f"round {round_no}: " + ", ".join(f"{k} {v[-1]:.1f}/s" for k, v in rates.items()), flush=True)

        # Marquez down: nothing listens on the port the events are addressed to; as in the stack, a drainer
        # process keeps trying the same outbox while producers emit
        down_url = f"http://127.0.0.1:{closed_port()}"
        down_path = Path(tmp) / "down.sqlite"
        emitter = LineageEmitter(down_path, down_url)
        drainer = multiprocessing.Process(target=_drain_forever, args=(str(down_path), down_url), daemon=True)
        drainer.start()
        down_events = runs(builder, args.down_events // 3 + 1)[: args.down_events]
        try:
            ours_down, ours_failures = timed_calls(emitter.emit, down_events)
            queued = Outbox(down_path).counts()
        finally:
            drainer.terminate()
            drainer.join()
        if queued.queued + queued.sent != len(down_events) or queued.duplicates_dropped:
            raise SystemExit(f"the outbox holds {queued} after {len(down_events)} emits with Marquez down")
        client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=down_url, timeout=5.0)))
        plain_down, plain_failures = timed_calls(
            client.emit, runs(builder, args.plain_down_events)[: args.plain_down_events]
        )

    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\nMarquez {url}: {args.rounds} rounds of {3 * args.runs} events ({args.runs} runs), medians")
    print(f"{'delivery into Marquez':<38} {'events/s':>10} {'vs plain':>9}")
    for name, label in (
        ("plain", "plain openlineage-python HTTP, inline"),
        ("drain-1", "outbox drainer, 1 worker"),
        (f"drain-{workers}", f"outbox drainer, {workers} workers"),
    ):
        print(f"{label:<38} {med[name]:>10.1f} {med[name] / med['plain']:>8.2f}x")
    print(f"\n{'emit call, Marquez down':<38} {'calls':>6} {'p50':>10} {'p90':>10} {'p99':>10} {'failed':>7}")
    for label, samples, failures, digits in (
        ("outbox (durable enqueue)", ours_down, ours_failures, 3),
        ("plain HTTP transport", plain_down, plain_failures, 1),
    ):
        print(
            f"{label:<38} {len(samples):>6} {ms(pct(samples, 50), digits)} {ms(pct(samples, 90), digits)} "
            f"{ms(pct(samples, 99), digits)} {sum(failures.values()):>7}"
        )
    print(
        f"(a drainer process retrying meanwhile; the outbox held all {queued.queued} events queued afterwards; "
        f"failures: outbox {dict(ours_failures) or 'none'}, plain {dict(plain_failures) or 'none'}; n/a: too few "
        "samples for that percentile)"
    )


if __name__ == "__main__":
    main()
