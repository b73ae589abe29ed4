"""supplier_stats runtime for N orders with the OpenLineage Spark listener on and off, in one run.

Writes N orders (one day) into a scratch Iceberg namespace, then runs the asset's aggregation + overwrite-by-day
in fresh Spark applications (one per run, the listener on or off, alternating) and prints medians, the overhead
ratio and rows/s. Needs the stack up.

    .venv/bin/python benchmarks/spark_supplier_stats.py --orders 1000000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

DAY = "2024-03-01"


def child(namespace: str, listener: bool, orders: int, events: str) -> None:
    from infra.settings import StackSettings
    from infra.spark import build_session
    from lineage_assets.spark.supplier_stats import CREATE_TARGET, aggregate, day_orders

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

    started = time.perf_counter()
    aggregate(day_orders(spark, source, DAY)).writeTo(target).overwrite(F.col("bid_date") == F.lit(DAY).cast("date"))
    elapsed = time.perf_counter() - started
    spark.stop()
    print(json.dumps({"seconds": elapsed}))


def run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=4, metavar=("NAMESPACE", "LISTENER", "ORDERS", "EVENTS"))
    args = parser.parse_args()
    if args.child:
        namespace, listener, orders, events = args.child
        child(namespace, listener == "on", int(orders), events)
        return

    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run_child(namespace, "off", str(args.orders), str(Path(tmp) / "setup.ndjson"))
        print(f"wrote {args.orders:,} orders in {time.perf_counter() - t0:.1f}s", flush=True)
        times: dict[str, list[float]] = {"off": [], "on": []}
        for i in range(args.runs):
            for variant in ("off", "on") if i % 2 == 0 else ("on", "off"):
                r = run_child(namespace, variant, "0", str(Path(tmp) / f"{variant}-{i}.ndjson"))
                times[variant].append(r["seconds"])
                print(f"run {i + 1} listener {variant}: {r['seconds']:.2f}s", flush=True)
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    print(f"\n{args.orders:,} orders, median of {args.runs} (aggregation + overwrite of one day; JVM start excluded)")
    print(f"listener off: {off:.2f}s  ({args.orders / off:,.0f} rows/s)")
    print(f"listener on:  {on:.2f}s  ({args.orders / on:,.0f} rows/s)")
    print(f"overhead: {(on / off - 1) * 100:+.1f}%")
    from infra.services.iceberg_catalog import load_catalog
    from infra.settings import StackSettings

    catalog = load_catalog(StackSettings.from_env())
    for table in ("supplier_stats", "orders"):
        catalog.purge_table(f"{namespace}.{table}")
    catalog.drop_namespace(namespace)


if __name__ == "__main__":
    main()
