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


#: seconds the daemon waits for one sensor evaluation (Dagster's default is 60). A tick that records a
#: materialization also evaluates that asset's checks and reconciles its hop; on two busy cores (a Spark run starting)
#: that took over 60 s, and a tick that times out is lost whole: its cursor, its events and its check evaluations,
#: so the next tick redoes the work and the sensor can fall behind for good. DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS set
#: in the environment of `stack up` takes precedence.
SENSOR_TIMEOUT_S = 300
SENSOR_TIMEOUT_ENV = "DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS"
#: sensors evaluated at once: the daemon evaluates them one after another by default, so one slow tick of the Flink
#: sensor delayed the connector sensor's too
SENSOR_WORKERS = 4


def instance_config(max_concurrent_runs: int) -> str:
    """The instance's dagster.yaml (rewritten at every start: the stack owns it). Runs and event logs in SQLite
    under DAGSTER_HOME; telemetry off on a machine with no internet; runs go through the daemon's queue, at most
    ``max_concurrent_runs`` at once, and every pool (the Spark runs' ``spark``) one run at a time; the sensors in
    ``SENSOR_WORKERS`` threads."""
    return f"""telemetry:
  enabled: false
sensors:
  use_threads: true
  num_workers: {SENSOR_WORKERS}
concurrency:
  runs:
    max_concurrent_runs: {max_concurrent_runs}
  pools:
    granularity: run
    default_limit: 1
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
                SENSOR_TIMEOUT_ENV: os.environ.get(SENSOR_TIMEOUT_ENV) or str(SENSOR_TIMEOUT_S),
            },
            cwd=REPO_ROOT,
        )

    def is_healthy(self) -> bool:
        return http_ok(f"http://{self.settings.host}:{self.settings.dagster_port}/server_info", timeout=3)
