"""Lineage emit latency and drain throughput: the outbox (lineage_assets.lineage.outbox) next to the plain
openlineage-python HTTP transport, in one run, against the same backend.

The backend is a minimal local HTTP receiver in its own process that accepts every POST on /api/v1/lineage with
201 (Marquez itself is not available on this machine: see README). "Down" means nothing listens on the port.
As in the embedded stack, the outbox is drained by a separate drainer process; producers only enqueue.

    .venv/bin/python benchmarks/emit.py --events 2000
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import multiprocessing
import socket
import statistics
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from openlineage.client import OpenLineageClient
from openlineage.client.transport.http import HttpConfig, HttpTransport
from openlineage.client.uuid import generate_new_uuid

from infra.settings import StackSettings
from lineage_assets.lineage.events import EventBuilder, RunState
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.outbox import LineageEmitter, Outbox


def _serve(port: int) -> None:
    class Accept(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Accept).serve_forever()


class Backend:
    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: multiprocessing.Process | None = None

    def up(self) -> None:
        self.proc = multiprocessing.Process(target=_serve, args=(self.port,), daemon=True)
        self.proc.start()
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("receiver did not start")

    def down(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.join()
            self.proc = None


def _drain_forever(path: str, url: str) -> None:
    LineageEmitter(Path(path), url).run_forever()


def start_drainer(path: Path, url: str) -> multiprocessing.Process:
    proc = multiprocessing.Process(target=_drain_forever, args=(str(path), url), daemon=True)
    proc.start()
    return proc


def wait_delivered(path: Path, n: int, timeout: float = 600) -> None:
    box = Outbox(path)
    deadline = time.monotonic() + timeout
    while box.counts().sent < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {box.counts().sent}/{n} delivered")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def events(builder: EventBuilder, n: int) -> list:
    out = []
    for i in range(n):
        run_id = str(generate_new_uuid())
        out.append(
            builder.event(
                "iceberg-ingestion",
                RunState.RUNNING,
                run_id,
                event_time=dt.datetime.now(dt.UTC) + dt.timedelta(milliseconds=i),
            )
        )
    return out


def timed_calls(fn, items) -> list[float]:
    samples = []
    for item in items:
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):
            fn(item)
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--plain-down-events", type=int, default=10, help="the plain transport blocks: keep small")
    args = parser.parse_args()

    builder = EventBuilder(Pipeline.from_settings(StackSettings()))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    backend = Backend(port)
    rows: list[tuple[str, str, str]] = []

    with tempfile.TemporaryDirectory() as tmp:
        # outbox, backend down: emit latency while the drainer process keeps failing to connect
        down_path = Path(tmp) / "down.sqlite"
        emitter = LineageEmitter(down_path, url)
        drainer = start_drainer(down_path, url)
        down = timed_calls(emitter.emit, events(builder, args.events))
        # drain throughput once the backend comes up (the drainer's backoff is at most 30 s: restart it to measure)
        drainer.terminate()
        drainer.join()
        backend.up()
        t0 = time.perf_counter()
        drainer = start_drainer(down_path, url)
        wait_delivered(down_path, args.events)
        drain_rate = args.events / (time.perf_counter() - t0)
        drainer.terminate()

        # outbox, backend up, drainer delivering concurrently
        up_path = Path(tmp) / "up.sqlite"
        emitter = LineageEmitter(up_path, url)
        drainer = start_drainer(up_path, url)
        up = timed_calls(emitter.emit, events(builder, args.events))
        wait_delivered(up_path, args.events)
        drainer.terminate()

    # plain openlineage-python HTTP transport, backend up: latency and throughput (it sends inline)
    client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, timeout=5.0)))
    t0 = time.perf_counter()
    plain_up = timed_calls(client.emit, events(builder, args.events))
    plain_rate = args.events / (time.perf_counter() - t0)
    backend.down()
    plain_down = timed_calls(client.emit, events(builder, args.plain_down_events))

    rows.append(("emit p50, backend up", f"{pct(up, 50):.3f} ms", f"{pct(plain_up, 50):.3f} ms"))
    rows.append(("emit p99, backend up", f"{pct(up, 99):.3f} ms", f"{pct(plain_up, 99):.3f} ms"))
    rows.append(("emit p50, backend down", f"{pct(down, 50):.3f} ms", f"{pct(plain_down, 50):.1f} ms"))
    rows.append(("emit p99, backend down", f"{pct(down, 99):.3f} ms", f"{pct(plain_down, 99):.1f} ms"))
    rows.append(("delivery rate (events/s)", f"{drain_rate:.0f} (drain)", f"{plain_rate:.0f} (inline)"))
    print(f"{args.events} events ({args.plain_down_events} for the plain transport with the backend down)")
    print(f"{'':<28} {'outbox':>18} {'plain http transport':>22}")
    for name, ours, plain in rows:
        print(f"{name:<28} {ours:>18} {plain:>22}")
    print(f"drain / plain delivery rate: {drain_rate / plain_rate:.2f}")


if __name__ == "__main__":
    main()
