"""Lineage delivery into the real Marquez of the running stack: the outbox's drainer (runs in parallel, each in
order) next to the plain openlineage-python HTTP transport (one event after another, inline), same events, same
Marquez; and the emit call's latency with Marquez down (nothing listening on its port), ours and the plain one.

Events belong to jobs in the namespace `lineage-lab-bench` (runs of START, RUNNING, COMPLETE), so they never touch
the pipeline's own jobs. Rounds alternate the contenders; medians are printed.

    .venv/bin/python benchmarks/emit.py --runs 100 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
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
from lineage_assets.lineage.marquez import MarquezClient, MarquezError
from lineage_assets.lineage.outbox import Drainer, LineageEmitter, Outbox

NAMESPACE = "lineage-lab-bench"
JOBS = ("iceberg-ingestion", "orders-s3-sink", "supplier-stats")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


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
    path = tmp / f"outbox-{workers}-{time.monotonic_ns()}.sqlite"
    outbox = Outbox(path)
    for event in events:
        outbox.enqueue(event)
    drainer = Drainer(outbox, url, workers=workers)
    t0 = time.perf_counter()
    try:
        if not drainer.flush(timeout=600):
            raise SystemExit(f"the drainer did not deliver everything: {outbox.counts()}")
    finally:
        drainer.stop()
    counts = outbox.counts()
    if counts.rejected:
        raise SystemExit(f"Marquez rejected {counts.rejected} events: {outbox.dead_letters()[:1]}")
    return len(events) / (time.perf_counter() - t0)


def plain_rate(events: list, url: str) -> float:
    client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, timeout=10.0)))
    t0 = time.perf_counter()
    for event in events:
        client.emit(event)
    return len(events) / (time.perf_counter() - t0)


def timed_calls(fn, items) -> list[float]:
    samples = []
    for item in items:
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):
            fn(item)
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def _drain_forever(path: str, url: str) -> None:
    LineageEmitter(Path(path), url).run_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100, help="runs per round (3 events each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--down-events", type=int, default=2000, help="emit calls timed with Marquez down")
    parser.add_argument("--plain-down-events", type=int, default=5, help="the plain transport blocks: keep small")
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
        for round_no in range(1, args.rounds + 1):
            rates["plain"].append(plain_rate(runs(builder, args.runs), url))
            rates["drain-1"].append(drain_rate(runs(builder, args.runs), url, 1, Path(tmp)))
            rates[f"drain-{workers}"].append(drain_rate(runs(builder, args.runs), url, workers, Path(tmp)))
            print(f"round {round_no}: " + ", ".join(f"{k} {v[-1]:.1f}/s" for k, v in rates.items()), flush=True)

        # Marquez down: nothing listens on the port the events are addressed to; as in the stack, a drainer
        # process keeps trying the same outbox while producers emit
        down_url = f"http://127.0.0.1:{closed_port()}"
        down_path = Path(tmp) / "down.sqlite"
        emitter = LineageEmitter(down_path, down_url)
        drainer = multiprocessing.Process(target=_drain_forever, args=(str(down_path), down_url), daemon=True)
        drainer.start()
        try:
            ours_down = timed_calls(emitter.emit, runs(builder, args.down_events // 3 + 1)[: args.down_events])
        finally:
            drainer.terminate()
            drainer.join()
        client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=down_url, timeout=5.0)))
        plain_down = timed_calls(client.emit, runs(builder, args.plain_down_events)[: args.plain_down_events])

    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\nMarquez {url}: {args.rounds} rounds of {3 * args.runs} events ({args.runs} runs), medians")
    print(f"{'delivery into Marquez':<38} {'events/s':>10} {'vs plain':>9}")
    for name, label in (
        ("plain", "plain openlineage-python HTTP, inline"),
        ("drain-1", "outbox drainer, 1 worker"),
        (f"drain-{workers}", f"outbox drainer, {workers} workers"),
    ):
        print(f"{label:<38} {med[name]:>10.1f} {med[name] / med['plain']:>8.2f}x")
    print(f"\n{'emit call, Marquez down':<38} {'p50':>10} {'p99':>10}")
    print(f"{'outbox (durable enqueue)':<38} {pct(ours_down, 50):>8.3f}ms {pct(ours_down, 99):>8.3f}ms")
    print(f"{'plain HTTP transport':<38} {pct(plain_down, 50):>8.1f}ms {pct(plain_down, 99):>8.1f}ms")
    print(f"({len(ours_down)} outbox calls, a drainer process retrying meanwhile; {len(plain_down)} plain calls)")


if __name__ == "__main__":
    main()
