"""The locks scripts/bootstrap.sh installs with (requirements.lock, flink_jobs/requirements.lock) hold every version
that pyproject.toml and flink_jobs/requirements.txt pin: a pin changed in one place and not in its lock would install
the lock's version, or fail, on every machine. Read as plain text, line by line, as pip and uv read them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;#]+)")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines: list[str]) -> dict[str, str]:
    """name -> version of every `name==version` line (extras and markers dropped, names normalized as PEP 503)."""
    found = {}
    for line in lines:
        match = PIN.match(line.strip())
        if match:
            found[normalized(match.group(1))] = match.group(2)
    return found


def test_the_pin_reader_reads_extras_markers_and_comments():
    assert pins(["pyiceberg[pyarrow]==0.10.0", "cffi==2.1.1 ; platform_python_implementation != 'PyPy'"]) == {
        "pyiceberg": "0.10.0",
        "cffi": "2.1.1",
    }
    assert pins(["# via dagster", "    # via", "Foo_Bar.baz==1.0  # why", "httpx>=0.28"]) == {"foo-bar-baz": "1.0"}


def test_the_dagster_lock_holds_every_pin_of_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = pins([*project["dependencies"], *project["optional-dependencies"]["dev"]])
    locked = pins((ROOT / "requirements.lock").read_text().splitlines())
    assert len(declared) == 20, "pyproject.toml pins 13 dependencies and 7 dev tools"
    assert {name: locked.get(name) for name in declared} == declared


def test_the_flink_lock_holds_every_pin_of_the_flink_requirements():
    declared = pins((ROOT / "flink_jobs" / "requirements.txt").read_text().splitlines())
    locked = pins((ROOT / "flink_jobs" / "requirements.lock").read_text().splitlines())
    assert declared == {"apache-flink": "2.0.0", "pandas": "2.2.3"}
    assert {name: locked.get(name) for name in declared} == declared
