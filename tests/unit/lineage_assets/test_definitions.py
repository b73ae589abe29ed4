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


def test_the_streaming_checks_schedule_runs_every_configured_minutes():
    from infra.settings import StackSettings
    from lineage_assets.definitions import build_definitions

    def cron(**settings) -> str:
        defs = build_definitions(StackSettings(**settings))
        return defs.resolve_schedule_def("streaming_lineage_checks_schedule").cron_schedule

    assert cron() == "*/5 * * * *"
    assert cron(checks_every_minutes=30) == "*/30 * * * *"
    assert cron(checks_every_minutes=60) == "0 * * * *"
