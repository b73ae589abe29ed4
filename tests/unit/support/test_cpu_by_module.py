"""tests/support/cpu_by_module.py: /proc/stat's busy time and the per-module table, from hand-written figures."""

from __future__ import annotations

from tests.support.cpu_by_module import ModuleCpu, busy_seconds, table


def test_busy_is_everything_but_idle_and_iowait():
    # user nice system idle iowait irq softirq steal (guest fields after them are inside user and left out)
    line = "cpu  1000 50 300 9000 200 10 40 0 77 0"
    assert busy_seconds(line, ticks=100) == (1000 + 50 + 300 + 10 + 40) / 100


def test_the_table_lists_modules_by_machine_cpu_and_ends_with_the_total(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    modules = {
        "tests/a.py": ModuleCpu(tests=2, wall=100, machine=50, own=20),
        "tests/b.py": ModuleCpu(tests=1, wall=10, machine=20, own=15),
        "tests/c.py": ModuleCpu(tests=3, wall=40, machine=80, own=5),
    }
    assert table(modules) == [
        "module\ttests\twall_s\tmachine_busy_cpu_s\tpytest_cpu_s\tmachine_busy_share",
        "tests/c.py\t3\t40\t80\t5\t100%",
        "tests/a.py\t2\t100\t50\t20\t25%",
        "tests/b.py\t1\t10\t20\t15\t100%",
        "total\t6\t150\t150\t40\t50%",
    ]
