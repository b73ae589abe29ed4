"""How long one `lineage-lab reconcile` takes with 1M and with 4M records in `orders` (issue 26: at most 5 s, and
less than 1.5x growth from 1M to 4M: each run reads only what is new since the last one).

For each size: orders are produced straight into `orders` (valid Avro orders, the encoder of
benchmarks/flink_throughput.py) until the topic holds that many records, the pipeline's consumers are given up to
--settle-s to catch up (their backlog is what reconcile reports as pending; the figures are printed), then:

- warm: --runs reconciliations in a process of their own each, `lineage-lab reconcile --json --confirm-after 0`
  with the stack's count store (a new process per run, as a user or cron runs it), and the same in-process
  (``reconcile()`` only, without the interpreter's start and imports), medians;
- cold: one reconciliation with an empty count store (LINEAGE_LAB_CONSERVATION_STORE in a temporary directory): the
  first run on a deployment, which counts everything once.

Between two warm runs the stream is idle apart from what the jobs still commit, so a warm run reads little: that is
the point (cost per run flat as the data grows); the cold figure shows what a first count costs. The new-orders
sensor is paused meanwhile (no Spark run on the benchmark's orders; the conservation check of supplier_stats then
reports those orders as pending, as it should). Prints every run's figures, medians and the 4M/1M ratio.

    .venv/bin/python benchmarks/reconcile.py --sizes 1000000,4000000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.flink_throughput import OrderEncoder, produce
from infra.settings import StackSettings
from lineage_assets.conservation.reconcile import reconcile
from lineage_assets.conservation.stores import RESOURCE_KEYS, Stores, count_store_path
from lineage_assets.kafka.topics import consumer_lag, end_offsets
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import opened_resources
from tests.support.new_orders_pause import new_orders_sensor_paused

GROUPS = ("iceberg-ingestion", "supplier-stats", "connect-orders-s3-sink")
REPO = Path(__file__).resolve().parent.parent


def records(settings: StackSettings) -> int:
    return sum(end_offsets(settings.kafka_bootstrap, "orders").values())


def lags(settings: StackSettings) -> dict[str, int | None]:
    return {g: consumer_lag(settings.kafka_bootstrap, "orders", g) for g in GROUPS}


def settle(settings: StackSettings, timeout: float) -> dict[str, int | None]:
    deadline = time.monotonic() + timeout
    while True:
        now = lags(settings)
        if all(v is not None and v < 1000 for v in now.values()) or time.monotonic() > deadline:
            return now
        time.sleep(10)


def cli_run(env: dict[str, str]) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    ran = subprocess.run(
        [str(REPO / ".venv/bin/lineage-lab"), "reconcile", "--json", "--confirm-after", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    took = time.perf_counter() - started
    if ran.returncode not in (0, 1):
        raise SystemExit(f"reconcile exited {ran.returncode}: {ran.stderr[-2000:]}")
    return took, json.loads(ran.stdout)


def in_process(settings: StackSettings, pipeline: Pipeline) -> float:
    resources = opened_resources(settings, RESOURCE_KEYS)
    started = time.perf_counter()
    reconcile(Stores(pipeline, resources, count_store_path(settings)), confirm_after_s=0)
    return time.perf_counter() - started


def describe(hops: list[dict]) -> str:
    return "; ".join(
        f"{h['job']}: {h['status']} in {h['in']} out {h['out']} dl {h['dead_letters']} pending {h['pending']} "
        f"({h.get('took_s')} s)"
        for h in hops
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000000,4000000", help="records in `orders` to measure at, ascending")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--settle-s", type=float, default=1800, help="how long the consumers get to catch up")
    p.add_argument("--rate", type=float, default=40_000, help="orders/s produced")
    p.add_argument(
        "--cold-sizes",
        default=None,
        help="the sizes to time a cold run at (default: every size; the cold run counts everything once)",
    )
    a = p.parse_args()
    settings = StackSettings.from_env()
    pipeline = Pipeline.from_settings(settings)
    encoder = OrderEncoder(settings)
    encoder.check()
    medians: dict[int, float] = {}
    cold_sizes = {int(s) for s in (a.cold_sizes or a.sizes).split(",") if s}
    with new_orders_sensor_paused(settings):
        for size in [int(s) for s in a.sizes.split(",")]:
            have = records(settings)
            if have < size:
                took, _, _ = produce(settings, encoder, size - have, (size - have) / a.rate)
                print(f"{size:,}: produced {size - have:,} orders in {took:.0f} s")
            print(
                f"{size:,}: {records(settings):,} records in orders; lag after settling: {settle(settings, a.settle_s)}"
            )
            env = {**os.environ, **settings.as_env()}
            if size in cold_sizes:
                with tempfile.TemporaryDirectory() as cold_dir:
                    cold_env = {**env, "LINEAGE_LAB_CONSERVATION_STORE": str(Path(cold_dir) / "counts.sqlite")}
                    took, hops = cli_run(cold_env)
                    print(f"{size:,}: cold (empty count store) {took:.2f} s  {describe(hops)}")
            took, hops = cli_run(env)  # the stack's store brought up to date before the warm runs
            print(f"{size:,}: catch-up run (the stack's count store) {took:.2f} s  {describe(hops)}")
            warm, inproc = [], []
            for i in range(a.runs):
                took, hops = cli_run(env)
                warm.append(took)
                inproc.append(in_process(settings, pipeline))
                print(f"{size:,}: warm run {i + 1}: CLI {took:.2f} s, in-process {inproc[-1]:.2f} s  {describe(hops)}")
            medians[size] = statistics.median(warm)
            print(
                f"{size:,}: median warm CLI {medians[size]:.2f} s, in-process {statistics.median(inproc):.2f} s "
                f"(runs {a.runs})"
            )
    sizes = sorted(medians)
    if len(sizes) > 1:
        print(f"growth {sizes[0]:,} -> {sizes[-1]:,}: {medians[sizes[-1]] / medians[sizes[0]]:.2f}x (goal < 1.5x)")


if __name__ == "__main__":
    main()
