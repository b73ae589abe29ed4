"""The ``dagster`` CLI against the stack's own instance: what its UI's sensor, schedule and launchpad pages do, for
tests that hold a sensor or a schedule still, or launch a run as the daemon would."""

from __future__ import annotations

from infra.services.dagster import DagsterDev, dagster_cli
from infra.settings import REPO_ROOT, StackSettings


def stack_dagster(settings: StackSettings, *args: str) -> None:
    """``dagster ARGS`` against the stack's instance and workspace; a failure raises with the CLI's own words."""
    result = dagster_cli(DagsterDev(settings).dagster_home, REPO_ROOT / "workspace.yaml", *args)
    if result.returncode != 0:
        raise RuntimeError(f"`dagster {' '.join(args)}` failed: {(result.stderr or result.stdout)[-800:]}")
