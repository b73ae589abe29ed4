"""The CPU a short local-mode Spark application costs, with the driver JVM's default JIT and with the JVM options
``LINEAGE_LAB_SPARK_DRIVER_JAVA_OPTIONS`` takes (C1 only, the serial collector).

A supplier_stats day run is a short application in local mode: the driver JVM starts, plans a few queries over one
day of orders and stops within a minute or two. Most of its CPU is start-up and compilation; the C2 compiler's
threads compete with the stack on a 2-core machine for code that runs only for seconds. Each round starts a fresh
Python process that builds a local session (no catalog, no listener: the JVM alone), runs an aggregation shaped like
supplier_stats (group by supplier and hour over generated orders) and reads the driver JVM's CPU time from /proc
before stopping it; rounds alternate between the two option sets. Medians and their ratio are printed. CPU seconds,
not wall time: the figure holds on a busy machine.

    .venv/bin/python benchmarks/spark_driver_jit.py --rounds 5 --rows 200000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

FAST_START = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

ROUND = r"""
import json, os, sys
from pyspark.sql import SparkSession, functions as F
options, rows = sys.argv[1], int(sys.argv[2])
builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
builder = builder.config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "1g")
if options:
    builder = builder.config("spark.driver.extraJavaOptions", options)
spark = builder.getOrCreate()
orders = spark.range(rows).select(
    (F.col("id") % 50).cast("string").alias("supplier"),
    (F.col("id") % 24).alias("bid_hour"),
    ((F.col("id") % 1000) / 10).cast("decimal(10,2)").alias("price"),
)
for _ in range(3):  # a day run plans and runs a few queries
    orders.groupBy("supplier", "bid_hour").agg(F.count("*"), F.sum("price")).collect()
pid = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{pid}/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
ticks = os.sysconf("SC_CLK_TCK")
print(json.dumps({"jvm_cpu_s": (int(fields[11]) + int(fields[12])) / ticks}))
spark.stop()
"""


def one_round(options: str, rows: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", ROUND, options, str(rows)], capture_output=True, text=True, check=True, timeout=600
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["jvm_cpu_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"default JIT": [], FAST_START: []}
    for _ in range(args.rounds):
        for options in ("", FAST_START):
            figures[options or "default JIT"].append(one_round(options, args.rows))
    medians = {k: statistics.median(v) for k, v in figures.items()}
    for name, values in figures.items():
        rounds = ", ".join(f"{v:.1f}" for v in values)
        print(f"{name:45s} driver JVM CPU median {medians[name]:6.1f} s  (rounds: {rounds})")
    print(f"ratio (options / default): {medians[FAST_START] / medians['default JIT']:.2f}")
    print(f"cores: {os.cpu_count()}, rows: {args.rows}, rounds: {args.rounds}")


if __name__ == "__main__":
    main()
