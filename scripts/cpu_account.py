"""Where the machine's CPU goes while the service tests run: each stack service's, and the rest (the tests' own
processes: pytest, the Spark sessions and Flink clients it starts, and anything else on the machine).

CI's service phase is CPU-bound on 2 cores, so shortening it means removing CPU work, and this says which. A sampler
reads ``/proc`` every few seconds: the machine's CPU counters, and for each stack service the CPU of its whole
process tree (a process's own time plus that of the children it has reaped, so a Dagster run or a Spark JVM that
ended is counted in the process that started it). A service restarted during the suite gets a new pid: each pid is
counted from its first sample to its last.

    .venv/bin/python scripts/cpu_account.py sample SAMPLES.jsonl [--every 5]   # until SIGTERM (scripts/test.sh)
    .venv/bin/python scripts/cpu_account.py report SAMPLES.jsonl               # the table
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TICKS = os.sysconf("SC_CLK_TCK")


def machine_ticks() -> dict[str, int]:
    """The first line of /proc/stat: the machine's CPU time by kind, in clock ticks, since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {name: int(value) for name, value in zip(names, fields, strict=False)}


def children_of() -> dict[int, list[int]]:
    """Every live process's children (from each process's parent pid)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            tree.setdefault(parent, []).append(int(entry.name))
    return tree


def process_ticks(pid: int) -> int:
    """utime + stime + cutime + cstime of ``pid`` (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    return sum(int(v) for v in fields[11:15])


def tree_ticks(pid: int, tree: dict[int, list[int]]) -> int:
    """The CPU of ``pid`` and of every live descendant (a reaped one is in its parent's cutime)."""
    total, todo = 0, [pid]
    while todo:
        at = todo.pop()
        total += process_ticks(at)
        todo.extend(tree.get(at, ()))
    return total


def service_pids() -> dict[str, int]:
    """Each running embedded stack service's pid (the stack's own record of it)."""
    from infra.services import build_stack
    from infra.services.base import read_pid
    from infra.settings import StackSettings

    pids = {service.name: read_pid(service) for service in build_stack(StackSettings.from_env())}
    return {name: pid for name, pid in pids.items() if pid}


def sample(out: Path, every: float) -> None:
    stop = False

    def ask_stop(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, ask_stop)
    signal.signal(signal.SIGINT, ask_stop)
    with out.open("a") as f:
        while not stop:
            tree = children_of()
            services = {name: [pid, tree_ticks(pid, tree)] for name, pid in service_pids().items()}
            f.write(json.dumps({"t": time.time(), "machine": machine_ticks(), "services": services}) + "\n")
            f.flush()
            end = time.monotonic() + every
            while not stop and time.monotonic() < end:
                time.sleep(0.2)


def report(path: Path) -> str:
    samples = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if len(samples) < 2:
        return f"{path}: fewer than two samples, nothing to report"
    first, last = samples[0]["machine"], samples[-1]["machine"]
    spent = {k: (last[k] - first[k]) / TICKS for k in last}
    wall = samples[-1]["t"] - samples[0]["t"]
    capacity = sum(spent.values())
    busy = capacity - spent["idle"] - spent.get("iowait", 0)
    by_pid: dict[tuple[str, int], list[int]] = {}
    for s in samples:
        for name, (pid, ticks) in s["services"].items():
            seen = by_pid.setdefault((name, pid), [ticks, ticks])
            seen[1] = max(seen[1], ticks)
    per_service: dict[str, float] = {}
    restarts: dict[str, int] = {}
    for (name, _), (start, end) in by_pid.items():
        per_service[name] = per_service.get(name, 0.0) + (end - start) / TICKS
        restarts[name] = restarts.get(name, -1) + 1
    lines = [
        f"CPU while sampled: {wall:.0f} s wall, {capacity:.0f} CPU-s of capacity, {busy:.0f} busy "
        f"({100 * busy / capacity:.0f} %), {spent['idle']:.0f} idle, {spent.get('iowait', 0):.0f} iowait",
        f"  {'where':<22}{'CPU-s':>8}{'share of busy':>15}",
    ]
    for name, cpu in sorted(per_service.items(), key=lambda kv: -kv[1]):
        note = f"  ({restarts[name]} restart(s): CPU before each counted to its last sample)" if restarts[name] else ""
        lines.append(f"  {name:<22}{cpu:>8.0f}{100 * cpu / busy:>14.0f}%{note}")
    rest = busy - sum(per_service.values())
    lines.append(f"  {'tests and the rest':<22}{rest:>8.0f}{100 * rest / busy:>14.0f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="sample until SIGTERM")
    s.add_argument("out", type=Path)
    s.add_argument("--every", type=float, default=5.0)
    r = sub.add_parser("report", help="print the table")
    r.add_argument("samples", type=Path)
    args = parser.parse_args(argv)
    if args.command == "sample":
        sample(args.out, args.every)
    else:
        print(report(args.samples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
