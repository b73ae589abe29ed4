"""``dagster dev`` on the lineage_assets code location: the webserver (UI) and the daemon that runs sensors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra.services.base import Launch, Service, http_ok
from infra.settings import REPO_ROOT


def dagster_cli(home: Path, workspace: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``dagster ARGS -w WORKSPACE`` against the instance in ``home`` (what the UI's sensor and schedule pages do),
    with the ``dagster`` beside this Python; its output captured for the caller's error."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("dagster")), *args, "-w", str(workspace)],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


#: the tag of the check runs the sensors ask for (lineage_assets/latest_checks.py), limited to one run at a time
CHECK_RUNS_TAG = "lineage-lab/checks-requested-by"
#: run monitoring (the daemon's): a run whose process never came up is failed after this long, as is a run stuck
#: cancelling. Without it such a run stays STARTING for ever, and the new-orders sensor, which asks for no day whose
#: run is waiting to start, would never ask for that day again.
RUN_START_TIMEOUT_S = 180
#: how often the daemon looks at the runs in flight
RUN_MONITOR_POLL_S = 30
#: how often the daemon launches queued runs (Dagster's default 5 s): a run someone waits for (a Spark day, a check
#: run) waited 2.5 s on average for the next look
DEQUEUE_INTERVAL_S = 1
#: sensors evaluated at once: the daemon evaluates them one after another by default, so one slow tick of the Flink
#: sensor delayed the connector sensor's too
SENSOR_WORKERS = 4


def instance_config(max_concurrent_runs: int) -> str:
    """The instance's dagster.yaml (rewritten at every start: the stack owns it). Runs and event logs in SQLite
    under DAGSTER_HOME; telemetry off on a machine with no internet; runs go through the daemon's queue (looked at
    every ``DEQUEUE_INTERVAL_S``), at most ``max_concurrent_runs`` at once, the check runs the sensors ask for one
    at a time (so a Spark run always finds a slot), and every pool (the Spark runs' ``spark``) one run at a time; the
    sensors in ``SENSOR_WORKERS`` threads; run monitoring fails a run that never started (``RUN_START_TIMEOUT_S``)
    and frees the pool slots of ended runs, and resumes nothing (a crashed Spark run is failed, to be asked for
    again)."""
    return f"""telemetry:
  enabled: false
sensors:
  use_threads: true
  num_workers: {SENSOR_WORKERS}
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: {DEQUEUE_INTERVAL_S}
concurrency:
  runs:
    max_concurrent_runs: {max_concurrent_runs}
    tag_concurrency_limits:
      - key: "{CHECK_RUNS_TAG}"
        limit: 1
  pools:
    granularity: run
    default_limit: 1
run_monitoring:
  enabled: true
  start_timeout_seconds: {RUN_START_TIMEOUT_S}
  cancel_timeout_seconds: {RUN_START_TIMEOUT_S}
  max_resume_run_attempts: 0
  poll_interval_seconds: {RUN_MONITOR_POLL_S}
  free_slots_after_run_end_seconds: {RUN_START_TIMEOUT_S}
"""


class DagsterDev(Service):
    name = "dagster"
    startup_timeout = 180.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.dagster_port,)

    @property
    def dagster_home(self) -> Path:
        return self.data_path

    def prepare(self) -> None:
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        (self.dagster_home / "dagster.yaml").write_text(instance_config(self.settings.dagster_max_concurrent_runs))

    def launch(self) -> Launch:
        dagster = Path(sys.executable).with_name("dagster")
        return Launch(
            [
                str(dagster),
                "dev",
                "-w",
                str(REPO_ROOT / "workspace.yaml"),
                "-h",
                self.settings.listen_host,
                "-p",
                str(self.settings.dagster_port),
            ],
            env={
                **self.settings.as_env(),
                "DAGSTER_HOME": str(self.dagster_home),
            },
            cwd=REPO_ROOT,
        )

    def is_healthy(self) -> bool:
        return http_ok(f"http://{self.settings.host}:{self.settings.dagster_port}/server_info", timeout=3)
