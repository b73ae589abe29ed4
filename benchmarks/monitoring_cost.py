"""What watching the pipeline costs: CPU seconds per group of processes, at rest and under a steady stream of orders,
and each sensor's tick durations, from Dagster's own tick history.

Two windows of --seconds each (120 by default): at rest (nothing produced), then under --rate orders/s (5,000 by
default) produced straight into `orders` at an even pace. Every second the benchmark reads each process's CPU time
(/proc/<pid>/stat, utime + stime) and files the process under the stack service whose process tree holds it; Spark
(a JVM under Dagster's run workers), the run workers (spawned by the code server: check runs and Spark runs' Python
drivers) and Dagster's own processes (webserver, daemon, code server) are told apart by their command lines. A
process that starts within a window counts all its CPU time, one that exits counts up to its last sample (at most a
second lost).
Figures: CPU seconds per group, and as a share of the machine (the window's seconds times its cores); the sensors'
ticks that ended within the window: count, p50, p99 and max of their durations (Dagster's tick start to end).

Needs the stack up with the pipeline deployed (`scripts/run.sh`).

    .venv/bin/python benchmarks/monitoring_cost.py --seconds 120 --rate 5000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import dagster as dg
from dagster._core.definitions.run_request import InstigatorType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for benchmarks.*

from benchmarks.flink_throughput import OrderEncoder, produce
from infra.services import build_stack
from infra.services.base import read_pid
from infra.services.dagster import DagsterDev
from infra.settings import StackSettings

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds used so far) of a process, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _dagster_group(pid: int, parents: dict[int, int]) -> str:
    """A process under ``dagster dev``: ``spark`` (a Spark JVM), ``dagster-runs`` (a run worker, which the code server
    starts with multiprocessing's spawn: the Python of a check run or of a Spark run's driver, or a process under
    one), else ``dagster`` (webserver, daemon, code server with the sensor ticks: the monitoring plane itself)."""
    if "org.apache.spark" in _cmdline(pid):
        return "spark"
    node, seen = pid, 0
    while node > 1 and seen < 64:
        if "multiprocessing.spawn" in _cmdline(node):
            return "dagster-runs"
        node, seen = parents.get(node, 0), seen + 1
    return "dagster"


class CpuSampler:
    """CPU seconds per group over a window, sampled every second."""

    def __init__(self, roots: dict[int, str]) -> None:
        self.roots = roots
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.group: dict[int, str] = {}
        self.stop = threading.Event()

    def _group_of(self, pid: int, parents: dict[int, int]) -> str | None:
        seen, node = 0, pid
        while node > 1 and seen < 64:
            if node in self.roots:
                name = self.roots[node]
                if name == "dagster":
                    return _dagster_group(pid, parents)
                return name
            node, seen = parents.get(node, 0), seen + 1
        return None

    def sample(self, initial: bool = False) -> None:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (s := _stat(int(entry))) is not None:
                stats[int(entry)] = s
        parents = {pid: ppid for pid, (ppid, _) in stats.items()}
        for pid, (_, cpu) in stats.items():
            if pid not in self.group:
                group = self._group_of(pid, parents)
                if group is None:
                    continue
                self.group[pid] = group
                self.first[pid] = cpu if initial else 0.0
            self.last[pid] = cpu

    def run(self) -> None:
        self.sample(initial=True)
        while not self.stop.wait(1.0):
            self.sample()

    def per_group(self) -> dict[str, float]:
        totals: dict[str, float] = defaultdict(float)
        for pid, group in self.group.items():
            totals[group] += self.last[pid] - self.first[pid]
        return dict(totals)


def tick_durations(home: Path, since: float, until: float) -> dict[str, list[float]]:
    """Seconds each sensor's ticks took, for ticks that ended in [since, until]."""
    durations: dict[str, list[float]] = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, after=since - 600, limit=2000)
            took = [
                t.end_timestamp - t.timestamp for t in ticks if t.end_timestamp and since <= t.end_timestamp <= until
            ]
            if took:
                durations[state.instigator_name] = sorted(took)
    return durations


def _percentile(values: list[float], share: float) -> float:
    return values[min(len(values) - 1, round(share * (len(values) - 1)))]


def window(settings: StackSettings, seconds: float, rate: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    roots = {pid: svc.name for svc in build_stack(settings) if (pid := read_pid(svc))}
    sampler = CpuSampler(roots)
    thread = threading.Thread(target=sampler.run, daemon=True)
    started = time.time()
    thread.start()
    if rate:
        took, _, _ = produce(settings, OrderEncoder(settings), int(rate * seconds), seconds)
        print(f"  produced {int(rate * seconds):,} orders in {took:.1f} s")
    rest = started + seconds - time.time()
    if rest > 0:
        time.sleep(rest)
    sampler.stop.set()
    thread.join()
    return sampler.per_group(), tick_durations(DagsterDev(settings).dagster_home, started, time.time())


def report(title: str, seconds: float, cpu: dict[str, float], ticks: dict[str, list[float]]) -> None:
    cores = os.cpu_count() or 1
    print(f"\n{title}: {seconds:.0f} s on {cores} cores")
    total = sum(cpu.values())
    for group, used in sorted(cpu.items(), key=lambda kv: -kv[1]):
        print(f"  {group:<20} {used:7.1f} CPU s  {100 * used / (seconds * cores):5.1f} % of the machine")
    print(f"  {'all of the stack':<20} {total:7.1f} CPU s  {100 * total / (seconds * cores):5.1f} % of the machine")
    for name, took in sorted(ticks.items()):
        print(
            f"  tick {name:<40} n={len(took):<3} p50 {statistics.median(took):6.2f} s  "
            f"p99 {_percentile(took, 0.99):6.2f} s  max {took[-1]:6.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--rate", type=int, default=5000, help="orders/s of the loaded window (0: rest only)")
    args = parser.parse_args()
    settings = StackSettings.from_env()
    cpu, ticks = window(settings, args.seconds, 0)
    report("at rest", args.seconds, cpu, ticks)
    if args.rate:
        cpu, ticks = window(settings, args.seconds, args.rate)
        report(f"under {args.rate:,} orders/s", args.seconds, cpu, ticks)


if __name__ == "__main__":
    main()
