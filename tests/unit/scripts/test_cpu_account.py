"""scripts/cpu_account.py: the table of where the CPU went, from hand-written samples (clock ticks of 1/100 s)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "cpu_account.py"
_spec = importlib.util.spec_from_file_location("cpu_account", SCRIPT)
assert _spec and _spec.loader
cpu_account = importlib.util.module_from_spec(_spec)
sys.modules["cpu_account"] = cpu_account
_spec.loader.exec_module(cpu_account)


def machine(user: int, idle: int) -> dict[str, int]:
    return {"user": user, "nice": 0, "system": 0, "idle": idle, "iowait": 0}


def test_each_service_pid_counts_from_its_first_sample_and_the_rest_is_the_tests(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_account, "TICKS", 100)
    samples = [
        # 100 s of wall on 2 cores: 200 CPU-s, of which 150 busy
        {"t": 0, "machine": machine(1000, 1000), "services": {"dagster": [7, 500], "kafka": [8, 100]}},
        {"t": 50, "machine": machine(8000, 3000), "services": {"dagster": [7, 3500], "kafka": [8, 600]}},
        # dagster restarted (a new pid): its old pid counted to its last sample, the new one from its first
        {"t": 100, "machine": machine(16000, 6000), "services": {"dagster": [9, 200], "kafka": [8, 1100]}},
        {"t": 100, "machine": machine(16000, 6000), "services": {"dagster": [9, 1200], "kafka": [8, 1100]}},
    ]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    lines = cpu_account.report(path).splitlines()
    assert lines[0] == "CPU while sampled: 100 s wall, 200 CPU-s of capacity, 150 busy (75 %), 50 idle, 0 iowait"
    # dagster: 30 (pid 7) + 10 (pid 9) = 40 CPU-s; kafka 10; the rest 150 - 50 = 100
    assert lines[2].split() == [
        "dagster",
        "40",
        "27%",
        "(1",
        "restart(s):",
        "CPU",
        "before",
        "each",
        "counted",
        "to",
        "its",
        "last",
        "sample)",
    ]
    assert lines[3].split() == ["kafka", "10", "7%"]
    assert lines[4].split() == ["tests", "and", "the", "rest", "100", "67%"]


def test_fewer_than_two_samples_say_so(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps({"t": 0, "machine": machine(0, 0), "services": {}}) + "\n")
    assert "fewer than two samples" in cpu_account.report(path)
