"""CPU per test module, for deciding which service modules to make cheaper (issue 38: on 2 cores the service phase
is CPU-bound once two pytest processes share the machine, so CI gets shorter by removing CPU work, and this says
where it is).

For each module: its wall time, the machine's busy CPU-s meanwhile (/proc/stat: the stack's services, Dagster's
runs, and any other pytest process running at the same time are in it), and the pytest process's own CPU-s
(``os.times()``: itself and the children it has reaped, so a ``lineage-lab`` command, a Flink client or a Spark
JVM it started and waited for). Setup and teardown count for the module whose test ran them, so a session fixture
(the main job) counts for the first module that needs it. Written as a TSV and printed at the end of the session
when ``LINEAGE_LAB_CPU_BY_MODULE`` names the TSV (scripts/test.sh sets it for the service tests).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

TICKS = os.sysconf("SC_CLK_TCK")
ENV = "LINEAGE_LAB_CPU_BY_MODULE"


def busy_seconds(proc_stat_first_line: str, ticks: int = TICKS) -> float:
    """The machine's busy CPU-s since boot from /proc/stat's first line: everything but idle and iowait."""
    values = [int(v) for v in proc_stat_first_line.split()[1:9]]
    return (sum(values) - values[3] - values[4]) / ticks


def machine_busy() -> float:
    with open("/proc/stat") as f:
        return busy_seconds(f.readline())


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class ModuleCpu:
    tests: int = 0
    wall: float = 0.0
    machine: float = 0.0
    own: float = 0.0


def table(modules: dict[str, ModuleCpu]) -> list[str]:
    """TSV lines, the header first, the modules by machine CPU-s (most first), then the total."""
    rows = sorted(modules.items(), key=lambda kv: -kv[1].machine)
    total = ModuleCpu(
        sum(m.tests for m in modules.values()),
        sum(m.wall for m in modules.values()),
        sum(m.machine for m in modules.values()),
        sum(m.own for m in modules.values()),
    )
    lines = ["module\ttests\twall_s\tmachine_busy_cpu_s\tpytest_cpu_s\tmachine_busy_share"]
    for name, m in [*rows, ("total", total)]:
        cores = m.machine / m.wall if m.wall else 0.0
        lines.append(f"{name}\t{m.tests}\t{m.wall:.0f}\t{m.machine:.0f}\t{m.own:.0f}\t{cores / os.cpu_count():.0%}")
    return lines


class CpuByModule:
    """The pytest plugin: every test's setup, call and teardown, summed per module."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.modules: dict[str, ModuleCpu] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        start = (time.monotonic(), machine_busy(), own_cpu())
        yield
        m = self.modules.setdefault(item.nodeid.split("::", 1)[0], ModuleCpu())
        m.tests += 1
        m.wall += time.monotonic() - start[0]
        m.machine += machine_busy() - start[1]
        m.own += own_cpu() - start[2]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.modules:
            return
        lines = table(self.modules)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text("\n".join(lines) + "\n")
        terminalreporter.write_sep("=", f"CPU per module (machine busy CPU-s, most first; also {self.out})")
        for line in lines:
            terminalreporter.write_line(
                "  ".join(f"{cell:>8}" if i else f"{cell:<72}" for i, cell in enumerate(line.split("\t")))
            )


def register(config: pytest.Config) -> None:
    """Register the plugin when ``LINEAGE_LAB_CPU_BY_MODULE`` names where to write the table."""
    target = os.environ.get(ENV)
    if target:
        config.pluginmanager.register(CpuByModule(Path(target)), "lineage-lab-cpu-by-module")
