"""Daemons a test or benchmark starts beside the stack (a Spark standalone cluster, a second Flink cluster): each
in the foreground in its own process group, logging to a file, stopped by signalling the whole group so that
nothing it forked (Python workers, executors) outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


class ForegroundProcesses:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def launch(self, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def any_exited(self) -> bool:
        return any(p.poll() is not None for p in self.procs)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to every group (last started first), SIGKILL after ``timeout``, then whatever is left in them."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs.clear()
