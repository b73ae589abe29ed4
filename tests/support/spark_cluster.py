"""A Spark standalone cluster (one master, N workers) from PySpark's own distribution, on loopback ports: what the
cluster service test and the Spark benchmark run supplier_stats on, without installing Spark. Each daemon is a
``spark-class`` process in its own process group (its executors included), stopped by signalling the group."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tests.support.foreground import ForegroundProcesses


class SparkClusterError(RuntimeError):
    """The cluster did not come up; the message names the daemon and its log."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class StandaloneCluster:
    work_dir: Path
    host: str = "127.0.0.1"
    master_port: int = 7177
    master_ui_port: int = 8190
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    daemon_memory: str = "256m"
    _daemons: ForegroundProcesses = field(default_factory=ForegroundProcesses)

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.master_ui_port}"

    def state(self) -> dict:
        """The master's view (its web UI's JSON): workers, active and completed applications."""
        return requests.get(f"{self.ui_url}/json/", timeout=5).json()

    def _launch(self, name: str, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": str(self.work_dir),
        }
        self._daemons.launch([str(spark_home() / "bin" / "spark-class"), *args], env, self.work_dir / f"{name}.log")

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", self.host, "--port", str(self.master_port), "--webui-port", str(self.master_ui_port)),
        )
        for i in range(self.workers):
            self._launch(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", self.host, "--cores", str(self.cores_per_worker), "--memory", self.memory_per_worker),
                *("--webui-port", str(self.master_ui_port + 1 + i), "--work-dir", str(self.work_dir / f"work-{i}")),
                self.master_url,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._daemons.any_exited():
                break
            try:
                if self.state().get("aliveworkers", 0) >= self.workers:
                    return self
            except (requests.RequestException, ValueError):
                pass
            time.sleep(1)
        self.stop()
        raise SparkClusterError(
            f"the Spark standalone cluster at {self.master_url} did not get {self.workers} alive workers within "
            f"{timeout:.0f} s; see the logs in {self.work_dir} (are ports {self.master_port}, {self.master_ui_port}.."
            f"{self.master_ui_port + self.workers} free?)"
        )

    def stop(self, timeout: float = 20.0) -> None:
        self._daemons.stop(timeout)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
