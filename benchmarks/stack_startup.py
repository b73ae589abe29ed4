"""Cold and warm start of the embedded stack: seconds to all-healthy per service, and resident memory.

Runs a private copy of the stack (fresh state directory, every port shifted by --port-offset) so it never
touches a stack that is already running. "Cold" = a new state directory (initdb, Kafka format, empty buckets)
with the JVM artifacts already cached; "warm" = the same state directory started again after a clean stop.
Prints medians over --runs runs.

    .venv/bin/python benchmarks/stack_startup.py --runs 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from infra import supervisor
from infra.services import build_stack
from infra.settings import StackSettings


def shifted(settings: StackSettings, home: Path, offset: int) -> StackSettings:
    ports = {
        f.name: getattr(settings, f.name) + offset for f in dataclasses.fields(settings) if f.name.endswith("_port")
    }
    return dataclasses.replace(settings, home=home, **ports)


def rss_mib(pid: int | None) -> float | None:
    """Resident memory of a service: its process and every process in its process group (Python workers...); None
    when the service left no pid, or no process of that group is alive (never read as 0 MiB)."""
    if not pid:
        return None
    total_kib = 0
    found = False
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[2]) != pid:  # field 5: process group id
                continue
            found = True
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total_kib / 1024 if found else None


def start_all(settings: StackSettings) -> tuple[float, dict[str, float]]:
    per_service: dict[str, float] = {}
    started = time.monotonic()
    for svc in build_stack(settings):
        t0 = time.monotonic()
        supervisor.start(svc, log=lambda _: None)
        per_service[svc.name] = time.monotonic() - t0
    return time.monotonic() - started, per_service


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port-offset", type=int, default=20000)
    args = parser.parse_args()

    base = StackSettings.from_env()
    cold: list[tuple[float, dict[str, float]]] = []
    warm: list[tuple[float, dict[str, float]]] = []
    memory: list[dict[str, float | None]] = []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="lineage-lab-bench-") as tmp:
            Path(tmp).chmod(0o755)  # PostgreSQL runs as its own OS user and must reach its data directory
            settings = shifted(base, Path(tmp), args.port_offset)
            services = build_stack(settings)
            try:
                cold.append(start_all(settings))
                time.sleep(5)  # let JIT and background threads settle before reading memory
                memory.append({s.name: rss_mib(supervisor.read_pid(s)) for s in services})
                supervisor.down(services, log=lambda _: None)
                warm.append(start_all(settings))
            finally:
                supervisor.down(services, log=lambda _: None)
        print(f"run {run}: cold {cold[-1][0]:.1f}s, warm {warm[-1][0]:.1f}s", flush=True)

    names = [s.name for s in build_stack(base)]
    print(f"\nmedians over {args.runs} run(s) (JVM artifacts cached; 2-core machine, noisy)")
    print(f"{'service':<20} {'cold s':>8} {'warm s':>8} {'RSS MiB':>9}")
    failed = []
    for name in names:
        c = statistics.median(r[1][name] for r in cold)
        w = statistics.median(r[1][name] for r in warm)
        missing = sum(1 for r in memory if r[name] is None)
        if missing:  # no pid, or no live process, in some run: the row fails rather than reading 0 MiB
            failed.append(name)
            m = f"{'MISSING':>9} (no process in {missing} of {len(memory)} runs)"
        else:
            m = f"{statistics.median(r[name] for r in memory):>9.0f}"
        print(f"{name:<20} {c:>8.1f} {w:>8.1f} {m}")
    total_c = statistics.median(r[0] for r in cold)
    total_w = statistics.median(r[0] for r in warm)
    total_m = statistics.median(sum(v for v in r.values() if v is not None) for r in memory)
    print(f"{'all healthy':<20} {total_c:>8.1f} {total_w:>8.1f} {total_m:>9.0f}{' (incomplete)' if failed else ''}")
    print(f"warm/cold ratio: {total_w / total_c:.2f}")
    if failed:
        raise SystemExit(f"FAILED: no process to measure for {', '.join(failed)}")


if __name__ == "__main__":
    main()
