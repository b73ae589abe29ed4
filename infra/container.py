"""One embedded service as the main process of a container (``lineage-lab service run NAME``).

The Compose deployment (infra/compose/) runs each service of the stack in a container of its own, from the same
service classes as the embedded stack: same configuration templates, same provisioning (databases, buckets),
same health checks. Here the service's output goes to the container's log instead of a file, a stop signal is
passed to its whole process group, and the container is only reported healthy (``lineage-lab service health``)
once the service answers *and* its provisioning is done, so that Compose starts its dependants after that.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from infra import supervisor
from infra.services.base import Service


def ready_marker(svc: Service) -> Path:
    """Written once the service is healthy and provisioned; removed when it starts or stops."""
    return svc.settings.run_dir / f"{svc.name}.ready"


def run(svc: Service, log: Callable[[str], None] = print) -> int:
    """Prepare, start, provision and then wait for the service; its exit code is ours."""
    marker = ready_marker(svc)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    svc.prepare()
    proc = supervisor.popen(svc.launch())
    log(f"{svc.name}: started pid {proc.pid}, waiting for health")

    def stop(signum: int, _frame: object) -> None:
        _stop(proc, svc.stop_timeout)
        marker.unlink(missing_ok=True)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.monotonic() + svc.startup_timeout
    while not svc.is_healthy():
        if proc.poll() is not None:
            log(f"{svc.name}: exited with {proc.returncode} before it became healthy (its output is above)")
            return proc.returncode or 1
        if time.monotonic() > deadline:
            log(f"{svc.name}: not healthy after {svc.startup_timeout:.0f}s; stopping it")
            _stop(proc, svc.stop_timeout)
            return 1
        time.sleep(0.5)
    try:
        svc.after_start()
    except Exception as exc:  # any provisioning failure ends the container, with its reason
        log(f"{svc.name}: healthy, but provisioning failed: {exc}")
        _stop(proc, svc.stop_timeout)
        return 1
    marker.write_text(str(proc.pid))
    log(f"{svc.name}: healthy and provisioned")
    code = proc.wait()
    marker.unlink(missing_ok=True)
    return code


def healthy(svc: Service) -> bool:
    """For Compose's healthcheck: provisioned by ``run`` in this container and answering now."""
    return ready_marker(svc).exists() and svc.is_healthy()


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM to the service's process group, SIGKILL after ``timeout``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
