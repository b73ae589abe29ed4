"""Every benchmark script imports: a helper renamed in tests/support or the product broke benchmarks/reconcile.py
(through flink_throughput's import of a pause helper that had moved) and nothing noticed until it was run. The
scripts run only under ``__main__``, so importing one touches no service."""

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem != "__init__")


def test_the_benchmarks_are_found():
    assert {"reconcile", "flink_throughput", "spark_supplier_stats"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_benchmark_imports(name):
    importlib.import_module(f"benchmarks.{name}")
