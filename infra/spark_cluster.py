"""A Spark standalone cluster (one master, N workers) from PySpark's own distribution, on loopback ports: what the
cluster service test and the Spark benchmark run supplier_stats on, without installing Spark. Each daemon is a
``spark-class`` process in its own process group (its executors included), stopped by signalling the group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests


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
    _procs: list[subprocess.Popen] = field(default_factory=list)

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
        log = (self.work_dir / f"{name}.log").open("ab")
        self._procs.append(
            subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

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
            if any(p.poll() is not None for p in self._procs):
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
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
