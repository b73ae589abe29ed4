import subprocess
import sys
from pathlib import Path

from infra.settings import REPO_ROOT


def test_workspace_validates_with_the_dagster_cli():
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lineage_assets" in result.stdout + result.stderr
