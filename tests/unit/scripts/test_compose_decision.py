"""scripts/test.sh --compose-decision: whether the Compose phase runs, said aloud, and failing CI when it cannot run
unasked. Run with a PATH of fakes: a `docker` present or not, an `id` answering a non-root uid or root."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

TEST_SH = Path(__file__).resolve().parents[3] / "scripts" / "test.sh"


def decide(tmp_path: Path, *, docker: bool, uid: int, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    os.symlink(shutil.which("dirname"), bin_dir / "dirname")  # test.sh's first line
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    if docker:
        (bin_dir / "docker").write_text("#!/bin/sh\nexit 0\n")
    for fake in bin_dir.iterdir():
        fake.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "LINEAGE_LAB_COMPOSE")}
    return subprocess.run(
        [shutil.which("bash"), str(TEST_SH), "--compose-decision"],
        env={**clean, "PATH": str(bin_dir), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("ci", ["true", ""])
def test_runs_with_docker_or_as_root(tmp_path: Path, ci: str) -> None:
    with_docker = decide(tmp_path / "a", docker=True, uid=1000, CI=ci)
    assert (with_docker.returncode, with_docker.stdout) == (0, "Compose phase: runs (docker is installed)\n")
    as_root = decide(tmp_path / "b", docker=False, uid=0, CI=ci)
    assert as_root.returncode == 0 and "runs (no docker yet, but root" in as_root.stdout


def test_cannot_run_outside_ci_says_why_and_goes_on(tmp_path: Path) -> None:
    result = decide(tmp_path, docker=False, uid=1000)
    assert result.returncode == 0
    assert "cannot run: no docker command and not root" in result.stdout
    assert "LINEAGE_LAB_COMPOSE=skip" in result.stdout


def test_cannot_run_under_ci_fails(tmp_path: Path) -> None:
    result = decide(tmp_path, docker=False, uid=1000, CI="true")
    assert result.returncode == 1
    assert "Under CI=true that fails the run" in result.stderr


def test_skip_on_purpose_passes_under_ci(tmp_path: Path) -> None:
    result = decide(tmp_path, docker=False, uid=1000, CI="true", LINEAGE_LAB_COMPOSE="skip")
    assert (result.returncode, result.stdout) == (0, "Compose phase: skipped on purpose (LINEAGE_LAB_COMPOSE=skip)\n")
