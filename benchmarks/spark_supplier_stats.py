"""supplier_stats runtime for N orders with the OpenLineage Spark listener on and off, in one run.

For each size, writes N orders (one day) into a scratch Iceberg namespace, then runs the asset's work (the rejected
orders' count, the aggregation and the overwrite of the day) and spark.stop() (where the listener sends the
application's last events), timed together, in fresh Spark applications (one per run, the listener on or off,
alternating), in local mode and with --standalone also on a Spark standalone cluster (tests/support/spark_cluster.py,
2 workers x 1 core), and prints medians, rows/s per core and the listener's overhead. Needs the stack up.

    .venv/bin/python benchmarks/spark_supplier_stats.py --sizes 1000000,10000000,50000000 --runs 3 --standalone
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for tests.support

DAY = "2024-03-01"


def child(namespace: str, listener: bool, orders: int, events: str) -> None:
    from infra.settings import StackSettings
    from infra.spark import build_session
    from lineage_assets.spark.day_frames import CREATE_TARGET, aggregate, day_orders, rule_reason

    settings = StackSettings.from_env()
    openlineage = (
        {
            "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": events,
            "spark.openlineage.namespace": "lineage-lab-bench",
        }
        if listener
        else None
    )
    spark = build_session(settings, "supplier_stats_bench", openlineage)
    source, target = f"lakehouse.{namespace}.orders", f"lakehouse.{namespace}.supplier_stats"
    if orders:  # setup run: write the orders
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lakehouse.{namespace}")
        spark.sql(f"""CREATE TABLE {source} (order_id string, item string, price decimal(10,2), supplier string,
                  bid_time timestamp_ntz) USING iceberg PARTITIONED BY (days(bid_time))""")
        spark.sql(f"""INSERT INTO {source} SELECT uuid(), 'Lamp', CAST(1 + (id % 14900) / 100.0 AS decimal(10,2)),
                  element_at(array('Alice','Bob','Carol','Alex','Joe','James','Jane','Jack'), CAST(id % 8 + 1 AS int)),
                  TIMESTAMP_NTZ '{DAY} 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400)
                  FROM range({orders})""")
        spark.sql(CREATE_TARGET.format(table=target))
        spark.stop()
        return
    from pyspark.sql import functions as F

    # what the asset does: count the day's rejected orders, aggregate and overwrite the day; and spark.stop(), where
    # the listener sends the application's last events (part of its overhead)
    started = time.perf_counter()
    orders = day_orders(spark, source, DAY)
    rejected = orders.where(rule_reason() != "").count()
    aggregate(orders).writeTo(target).overwrite(F.col("bid_date") == F.lit(DAY).cast("date"))
    spark.stop()
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "rejected": rejected}))


def run_child(*args: str, master: str | None = None) -> dict:
    env = {**os.environ, **({"LINEAGE_LAB_SPARK_MASTER": master} if master else {})}
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}


def measure(namespace: str, size: int, runs: int, tmp: Path, master: str | None) -> dict[str, float]:
    """Median seconds with the listener off and on, alternating which goes first."""
    times: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(runs):
        for variant in ("off", "on") if i % 2 == 0 else ("on", "off"):
            r = run_child(namespace, variant, "0", str(tmp / f"{variant}-{size}-{i}.ndjson"), master=master)
            times[variant].append(r["seconds"])
            print(
                f"  {size:,} {'cluster' if master else 'local'} run {i + 1} listener {variant}: {r['seconds']:.2f}s",
                flush=True,
            )
    return {variant: statistics.median(values) for variant, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000", help="comma-separated order counts, e.g. 1000000,10000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--standalone", action="store_true", help="also on a standalone cluster (2 workers x 1 core)")
    parser.add_argument("--child", nargs=4, metavar=("NAMESPACE", "LISTENER", "ORDERS", "EVENTS"))
    args = parser.parse_args()
    if args.child:
        namespace, listener, orders, events = args.child
        child(namespace, listener == "on", int(orders), events)
        return

    from infra.services.iceberg_catalog import load_catalog
    from infra.settings import StackSettings
    from tests.support.spark_cluster import StandaloneCluster

    catalog = load_catalog(StackSettings.from_env())
    cores = 2  # local[2], and the cluster's 2 workers x 1 core
    results = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        cluster = stack.enter_context(StandaloneCluster(Path(tmp) / "cluster")) if args.standalone else None
        for size in (int(s) for s in args.sizes.split(",")):
            namespace = f"bench_{uuid.uuid4().hex[:8]}"
            t0 = time.perf_counter()
            run_child(namespace, "off", str(size), str(Path(tmp) / "setup.ndjson"))
            print(f"wrote {size:,} orders in {time.perf_counter() - t0:.1f}s", flush=True)
            for master in [None, *([cluster.master_url] if cluster else [])]:
                medians = measure(namespace, size, args.runs, Path(tmp), master)
                results.append((size, "standalone" if master else "local[2]", medians))
            for table in ("supplier_stats", "orders"):
                catalog.purge_table(f"{namespace}.{table}")
            catalog.drop_namespace(namespace)

    print(
        f"\nmedians of {args.runs} runs (rejected-orders count, aggregation, overwrite of one day and spark.stop(); "
        f"JVM start excluded), {cores} cores"
    )
    print(f"{'orders':>12} {'mode':<11} {'off s':>8} {'on s':>8} {'rows/s/core':>12} {'overhead':>9}")
    for size, mode, m in results:
        print(
            f"{size:>12,} {mode:<11} {m['off']:>8.2f} {m['on']:>8.2f} {size / m['off'] / cores:>12,.0f} "
            f"{(m['on'] / m['off'] - 1) * 100:>+8.1f}%"
        )


if __name__ == "__main__":
    main()
