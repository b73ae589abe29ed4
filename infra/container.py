"""One embedded service as the main process of a container (``lineage-lab service run NAME``).

The Compose deployment (infra/compose/) runs each service of the stack in a container of its own, from the same
service classes as the embedded stack: same configuration templates, same provisioning (databases, buckets),
same health checks. Here the service's output goes to the container's log instead of a file, a stop signal is
passed to its whole process group, and the container is only reported healthy once the service answers *and* its
provisioning is done, so that Compose starts its dependants after that.

The health probe runs here, in the container's main process, every ``PROBE_INTERVAL_S``; each healthy probe writes
the ready marker with the time until which it counts, and Compose's healthcheck (infra/compose/healthy.sh) only reads
that time. A probe as a process of its own (``lineage-lab service health``, a Python start with the CLI's imports,
0.7 CPU-s) every 5 s in each of 10 containers took most of the 2 cores and made every run of the deployment 2-4 times
slower (its main job 1,129 s, 496 s since).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from infra import supervisor
from infra.services.base import Service

#: seconds between two health probes of a running service
PROBE_INTERVAL_S = 10.0
#: a healthy probe counts for this many probe intervals, so that one slow probe does not turn the container unhealthy
HEALTHY_FOR_PROBES = 3


def ready_marker(svc: Service) -> Path:
    """Holds the Unix time until which the last healthy probe counts, once the service is healthy and provisioned;
    removed when it starts, stops or a probe finds it unhealthy."""
    return svc.settings.run_dir / f"{svc.name}.ready"


def _mark_healthy(marker: Path) -> None:
    # whole seconds (what `date +%s` compares with), rounded up so that it never counts for less
    marker.write_text(f"{math.ceil(time.time() + HEALTHY_FOR_PROBES * PROBE_INTERVAL_S)}\n")


def run(svc: Service, log: Callable[[str], None] = print) -> int:
    """Prepare, start, provision and then wait for the service; its exit code is ours (128 + the signal when Docker
    stopped it)."""
    marker = ready_marker(svc)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    svc.prepare()
    proc = supervisor.popen(svc.launch())
    log(f"{svc.name}: started pid {proc.pid}, waiting for health")
    stopping: list[tuple[int, float]] = []  # (signal, SIGKILL deadline) once Docker asked us to stop

    def stop(signum: int, _frame: object) -> None:
        # only signal here: waiting for the child belongs to the loop below (Popen.wait is not re-entrant)
        if not stopping:
            stopping.append((signum, time.monotonic() + svc.stop_timeout))
            _signal_group(proc, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.monotonic() + svc.startup_timeout
    ready = False
    next_probe = 0.0
    while proc.poll() is None:
        if stopping and time.monotonic() > stopping[0][1]:
            _signal_group(proc, signal.SIGKILL)
        elif ready and not stopping and time.monotonic() >= next_probe:
            next_probe = time.monotonic() + PROBE_INTERVAL_S
            if svc.is_healthy():
                _mark_healthy(marker)
            else:
                marker.unlink(missing_ok=True)
        elif not ready and not stopping:
            if svc.is_healthy():
                try:
                    svc.after_start()
                except Exception as exc:  # any provisioning failure ends the container, with its reason
                    log(f"{svc.name}: healthy, but provisioning failed: {exc}")
                    stop(0, None)  # 0: our own decision, not a signal
                    continue
                _mark_healthy(marker)
                ready = True
                next_probe = time.monotonic() + PROBE_INTERVAL_S
                log(f"{svc.name}: healthy and provisioned")
            elif time.monotonic() > deadline:
                log(f"{svc.name}: not healthy after {svc.startup_timeout:.0f}s; stopping it")
                stop(0, None)
        time.sleep(0.5)
    marker.unlink(missing_ok=True)
    _signal_group(proc, signal.SIGKILL)  # whatever it forked and left behind
    if stopping:
        return 128 + stopping[0][0] if stopping[0][0] else 1
    if not ready:
        log(f"{svc.name}: exited with {proc.returncode} before it became healthy (its output is above)")
        return proc.returncode or 1
    return proc.returncode


def healthy(svc: Service) -> bool:
    """``lineage-lab service health``: provisioned by ``run`` in this container, its last probe healthy and recent,
    and answering now (what infra/compose/healthy.sh reads, plus a probe of its own)."""
    try:
        until = int(ready_marker(svc).read_text())
    except (OSError, ValueError):
        return False
    return time.time() < until and svc.is_healthy()


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)
