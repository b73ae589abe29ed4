"""A second Flink 2.0 session cluster (one JobManager, one TaskManager) from the PyFlink wheel, on other loopback
ports and with its own FLINK_HOME, state and logs under one directory: what the session-cluster service test
deploys both Flink jobs to by its REST URL (LINEAGE_LAB_EXTERNAL_FLINK), as on a team's shared cluster.

Unlike the stack's cluster its lib/ holds only the wheel's own jars: no connectors (each job brings them, uploaded
with the submission) and no OpenLineage listener (unless ``openlineage`` is set, which links the listener's jar and
configures it). Each daemon runs in the foreground in its own process group (the TaskManager's Python workers
included), stopped by signalling the group.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from infra.services.base import port_open
from infra.services.flink import FlinkLayout, assemble, connector_jars, pyflink_dir
from infra.settings import StackSettings
from tests.support.foreground import ForegroundProcesses


class FlinkClusterError(RuntimeError):
    """The cluster did not come up; the message names its logs."""


@dataclass
class FlinkSessionCluster:
    settings: StackSettings
    work_dir: Path
    host: str = "127.0.0.1"
    rest_port: int = 8095
    rpc_port: int = 6133
    jobmanager_mb: int = 768
    taskmanager_mb: int = 1536
    #: supplier-stats takes one slot per partition of `orders` (3), iceberg-ingestion 1; two spare for restarts
    slots: int = 6
    metaspace_mb: int = 384
    #: configure the OpenLineage listener (its jar linked into lib/), events to work_dir/openlineage.jsonl
    openlineage: bool = False
    _daemons: ForegroundProcesses = field(default_factory=ForegroundProcesses)

    @property
    def rest_url(self) -> str:
        return f"http://{self.host}:{self.rest_port}"

    @property
    def layout(self) -> FlinkLayout:
        listener_jars = tuple(j for j in connector_jars(self.settings) if j.name.startswith("openlineage-flink"))
        return FlinkLayout(
            home=self.work_dir / "flink",
            data_dir=self.work_dir / "data",
            log_dir=self.work_dir / "log",
            host=self.host,
            rpc_port=self.rpc_port,
            rest_port=self.rest_port,
            jobmanager_mb=self.jobmanager_mb,
            taskmanager_mb=self.taskmanager_mb,
            python=self.settings.flink_venv / "bin" / "python",
            slots=self.slots,
            metaspace_mb=self.metaspace_mb,
            lib_jars=listener_jars if self.openlineage else (),
            openlineage_file=self.work_dir / "openlineage.jsonl" if self.openlineage else None,
            ident="lineage-lab-second",
        )

    def overview(self) -> dict | None:
        """The cluster's REST /overview (TaskManagers, slots, jobs); None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.rest_url}/overview", timeout=2) as resp:
                return json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def _launch(self, name: str, script: str, layout: FlinkLayout) -> None:
        # the jobs' S3 clients (Iceberg's S3FileIO) read the object store's region and checksum mode from here
        env = {**os.environ, **layout.env(), **self.settings.aws_sdk_env()}
        self._daemons.launch(
            [str(layout.home / "bin" / script), "start-foreground"], env, self.work_dir / f"{name}.log"
        )

    def start(self, timeout: float = 180.0) -> FlinkSessionCluster:
        busy = [p for p in (self.rest_port, self.rpc_port) if port_open(self.host, p)]
        if busy:
            raise FlinkClusterError(f"ports {busy} on {self.host} are in use: another Flink cluster is running there")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        layout = self.layout
        assemble(pyflink_dir(self.settings), layout)
        self._launch("jobmanager", "jobmanager.sh", layout)
        self._launch("taskmanager", "taskmanager.sh", layout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._daemons.any_exited():
                break
            overview = self.overview()
            if overview and overview.get("taskmanagers", 0) >= 1:
                return self
            time.sleep(1)
        self.stop()
        raise FlinkClusterError(
            f"the Flink session cluster at {self.rest_url} did not get a TaskManager within {timeout:.0f} s; see "
            f"{self.work_dir}/jobmanager.log, taskmanager.log and {layout.log_dir}"
        )

    def stop(self, timeout: float = 30.0) -> None:
        self._daemons.stop(timeout)

    def __enter__(self) -> FlinkSessionCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
