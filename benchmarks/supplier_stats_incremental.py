"""A supplier_stats run's time as its day grows: an incremental run (what the new-orders sensor asks for) against a
full one, with 1M and 4M orders already in the day.

For each size, writes N orders of one day into a scratch Iceberg namespace and writes the day once (full). Then, for
each round, appends a small batch of new orders (one Iceberg append snapshot, as a Flink checkpoint makes) and times
the asset's own `write_day` in incremental mode, then appends another batch and times a full run (the order
alternates between rounds). One warm Spark application per size (local[2], the listener off), so the figures are
the run's work: planning, reading, aggregating, merging and the one commit. Prints medians and the ratio of the 4M
median to the 1M median for each mode (issue 37's target: an incremental run grows less than 1.3x). Needs the stack
up.

    .venv/bin/python benchmarks/supplier_stats_incremental.py --sizes 1000000,4000000 --batch 5000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DAY = "2024-03-01"
SUPPLIERS = "array('Alice','Bob','Carol','Alex','Joe','James','Jane','Jack')"


def insert(spark, table: str, count: int, offset: int) -> None:
    """``count`` orders of DAY spread over its seconds, in one Iceberg append."""
    spark.sql(f"""INSERT INTO {table} SELECT uuid(), 'Lamp', CAST(1 + (id % 14900) / 100.0 AS decimal(10,2)),
              element_at({SUPPLIERS}, CAST(id % 8 + 1 AS int)),
              TIMESTAMP_NTZ '{DAY} 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400)
              FROM range({offset}, {offset + count})""")


def timed(spark, catalog, source: str, target: str, mode: str) -> tuple[float, str, int]:
    from lineage_assets.spark.day_write import write_day

    started = time.perf_counter()
    done = write_day(spark, catalog, source, target, DAY, mode)
    return time.perf_counter() - started, done.read.mode, done.read.rows


def measure(spark, catalog, size: int, batch: int, rounds: int) -> dict[str, list[float]]:
    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    source, target = f"lakehouse.{namespace}.orders", f"lakehouse.{namespace}.supplier_stats"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lakehouse.{namespace}")
    spark.sql(f"""CREATE TABLE {source} (order_id string, item string, price decimal(10,2), supplier string,
              bid_time timestamp_ntz) USING iceberg PARTITIONED BY (days(bid_time))
              TBLPROPERTIES ('write.summary.partition-limit'='400')""")
    t0 = time.perf_counter()
    insert(spark, source, size, 0)
    print(f"wrote {size:,} orders in {time.perf_counter() - t0:.1f}s", flush=True)
    timed(spark, catalog, source, target, "full")  # the day's first write: the base of the incremental runs
    times: dict[str, list[float]] = {"incremental": [], "full": []}
    offset = size
    try:
        for i in range(rounds):
            for mode in ("incremental", "full") if i % 2 == 0 else ("full", "incremental"):
                insert(spark, source, batch, offset)
                offset += batch
                seconds, ran, read = timed(spark, catalog, source, target, mode)
                assert ran == mode, f"a {mode} run was planned as {ran}"
                times[mode].append(seconds)
                print(f"  {size:,} round {i + 1} {mode}: {seconds:.2f}s, {read:,} orders read", flush=True)
    finally:
        for table in ("supplier_stats", "orders"):
            catalog.purge_table(f"{namespace}.{table}")
        catalog.drop_namespace(namespace)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,4000000", help="orders already in the day, comma-separated")
    parser.add_argument("--batch", type=int, default=5000, help="orders appended before each timed run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from infra.services.iceberg_catalog import load_catalog
    from infra.settings import StackSettings
    from infra.spark import build_session

    settings = StackSettings.from_env()
    catalog = load_catalog(settings)
    spark = build_session(settings, "supplier_stats_incremental_bench")
    sizes = [int(s) for s in args.sizes.split(",")]
    medians: dict[int, dict[str, float]] = {}
    try:
        for size in sizes:
            times = measure(spark, catalog, size, args.batch, args.rounds)
            medians[size] = {mode: statistics.median(values) for mode, values in times.items()}
    finally:
        spark.stop()
    print(f"\nmedians of {args.rounds} runs of one day ({args.batch:,} new orders before each), local[2], warm JVM")
    print(f"{'orders in day':>14} {'incremental s':>14} {'full s':>8} {'full/incremental':>17}")
    for size, m in medians.items():
        print(f"{size:>14,} {m['incremental']:>14.2f} {m['full']:>8.2f} {m['full'] / m['incremental']:>16.2f}x")
    if len(sizes) > 1:
        small, large = medians[sizes[0]], medians[sizes[-1]]
        grown = {mode: large[mode] / small[mode] for mode in ("incremental", "full")}
        print(
            f"growth from {sizes[0]:,} to {sizes[-1]:,}: incremental {grown['incremental']:.2f}x, "
            f"full {grown['full']:.2f}x"
        )


if __name__ == "__main__":
    main()
