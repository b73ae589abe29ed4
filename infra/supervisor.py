"""Start, stop and inspect the embedded services, in dependency order.

Each service runs as one foreground process in its own session, so its pid is also its process-group id and a
stop takes down everything it forked. A pid file records the pid *and* the kernel's start time of that process,
so ``down`` never signals an unrelated process that happens to reuse the pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from infra.services.base import Launch, Service, ServiceError, port_open, process_start_time, read_pid

#: what :func:`start` answers for a service that runs already
ALREADY_RUNNING = "already running"


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    ports: tuple[int, ...]
    pid: int | None
    running: bool
    healthy: bool
    log: Path

    @property
    def state(self) -> str:
        if self.running and self.healthy:
            return "healthy"
        if self.running:
            return "starting/unhealthy"
        if self.healthy:
            return "healthy (not ours)"
        return "stopped"


def status(services: Sequence[Service]) -> list[ServiceStatus]:
    rows = []
    for svc in services:
        pid = read_pid(svc)
        rows.append(ServiceStatus(svc.name, svc.ports, pid, pid is not None, svc.is_healthy(), svc.log_path))
    return rows


def endpoint_address(endpoint: str) -> tuple[str, int] | None:
    """(host, port) of a URL or of the first server of a Kafka bootstrap list; None when it names neither."""
    first = endpoint.split(",")[0].strip()
    parsed = urlsplit(first if "://" in first else f"tcp://{first}")
    if not parsed.hostname:
        return None
    try:
        port = parsed.port
    except ValueError:
        return None
    if port is None:
        port = {"https": 443, "http": 80}.get(parsed.scheme)
    return (parsed.hostname, port) if port else None


def reachable(endpoint: str, timeout: float = 2.0) -> bool:
    """An external endpoint accepts TCP connections (its credentials are the clients' business, not the stack's)."""
    address = endpoint_address(endpoint)
    return address is not None and port_open(*address, timeout=timeout)


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log written)"


def popen(launch: Launch, stdout: object = None) -> subprocess.Popen:
    """Start one launch in its own session (its pid is its process group), as its OS user when we are root."""
    env = {**os.environ, **launch.env}
    kwargs: dict[str, object] = {}
    if launch.user and os.geteuid() == 0:
        entry = pwd.getpwnam(launch.user)
        kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[])
        env["HOME"] = entry.pw_dir
    return subprocess.Popen(
        launch.argv,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        cwd=launch.cwd,
        env=env,
        start_new_session=True,
        preexec_fn=_default_shutdown_signals,
        **kwargs,  # type: ignore[arg-type]
    )


def _default_shutdown_signals() -> None:
    """Runs in the child before exec. A signal the caller ignores (nohup, a shell's background job, a test runner)
    stays ignored across exec, and a JVM leaves an ignored SIGTERM ignored (it installs no shutdown hook for it):
    ``stop`` could then only SIGKILL it after ``stop_timeout``, losing the graceful shutdown (Connect's offsets,
    Kafka's clean log close). The service is in its own session, so no terminal sends it these signals."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _spawn(svc: Service) -> int:
    launch = svc.launch()
    svc.log_path.parent.mkdir(parents=True, exist_ok=True)
    svc.pid_path.parent.mkdir(parents=True, exist_ok=True)
    with open(svc.log_path, "ab") as log:
        log.write(f"\n===== lineage-lab starting {svc.name} at {time.ctime()} =====\n".encode())
        log.flush()
        proc = popen(launch, log)
    svc.pid_path.write_text(json.dumps({"pid": proc.pid, "start_time": process_start_time(proc.pid)}))
    return proc.pid


def start(svc: Service, log: Callable[[str], None] = print) -> str:
    """Start one service unless it already runs; return what happened. Raises ServiceError on failure."""
    pid = read_pid(svc)
    if pid is not None:
        if not svc.is_healthy():
            _wait_healthy(svc, pid)
        svc.after_start()
        return f"{ALREADY_RUNNING} (pid {pid})"
    taken = [p for p in svc.ports if port_open(svc.settings.host, p)]
    deadline = time.monotonic() + svc.stop_timeout
    while taken and _exiting(svc) and time.monotonic() < deadline:
        # our own process was killed and is still exiting: its threads hold the ports for a moment
        time.sleep(0.2)
        taken = [p for p in svc.ports if port_open(svc.settings.host, p)]
    if taken:
        raise svc.fail(
            f"port(s) {taken} on {svc.settings.host} are already in use by a process lineage-lab did not start; "
            f"stop that process or move this service with LINEAGE_LAB_*_PORT (see README, Ports)"
        )
    svc.prepare()
    started = time.monotonic()
    pid = _spawn(svc)
    log(f"  {svc.name}: started pid {pid}, waiting for health (log {svc.log_path})")
    _wait_healthy(svc, pid)
    svc.after_start()
    return f"healthy after {time.monotonic() - started:.1f}s (pid {pid})"


def _exiting(svc: Service) -> bool:
    """The pid file names a process lineage-lab started that has died but is still listed (a zombie leader)."""
    try:
        record = json.loads(svc.pid_path.read_text())
    except (OSError, ValueError):
        return False
    pid = int(record.get("pid", 0))
    return pid > 0 and process_start_time(pid) == record.get("start_time") and read_pid(svc) is None


def _wait_healthy(svc: Service, pid: int) -> None:
    deadline = time.monotonic() + svc.startup_timeout
    while time.monotonic() < deadline:
        if svc.is_healthy():
            return
        if process_start_time(pid) is None or _is_zombie(pid):
            raise svc.fail(f"the process exited before it became healthy; last log lines:\n{_log_tail(svc.log_path)}")
        time.sleep(0.5)
    raise svc.fail(
        f"not healthy after {svc.startup_timeout:.0f}s (pid {pid} still running); last log lines:\n"
        f"{_log_tail(svc.log_path)}"
    )


def _is_zombie(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _still_running(svc: Service, pid: int) -> bool:
    """Alive, or exiting but still holding its ports (a zombie leader whose other threads still run)."""
    if process_start_time(pid) is not None and not _is_zombie(pid):
        return True
    return any(port_open(svc.settings.host, p) for p in svc.ports)


#: how long ``stop`` waits for a SIGKILLed process to let go of its ports
KILLED_EXIT_TIMEOUT_S = 15.0


def stop(svc: Service) -> str:
    """Stop one service we started: SIGTERM to its process group, SIGKILL after ``stop_timeout``."""
    pid = read_pid(svc)
    if pid is None:
        svc.pid_path.unlink(missing_ok=True)
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + svc.stop_timeout
    while time.monotonic() < deadline and _still_running(svc, pid):
        time.sleep(0.2)
    outcome = "stopped"
    if _still_running(svc, pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        outcome = f"killed after {svc.stop_timeout:.0f}s"
        # a killed JVM's threads hold its ports a moment after its leader died: a start right after must find
        # them free, not "in use by a process lineage-lab did not start"
        deadline = time.monotonic() + KILLED_EXIT_TIMEOUT_S
        while time.monotonic() < deadline and _still_running(svc, pid):
            time.sleep(0.2)
    svc.pid_path.unlink(missing_ok=True)
    return outcome


def up(services: Sequence[Service], log: Callable[[str], None] = print) -> list[str]:
    """Start services in order; stop at the first failure (what is up stays up for inspection). Logs a line for
    each service it starts; returns the names of those that were already running (and are healthy)."""
    running = []
    for svc in services:
        result = start(svc, log)
        if result.startswith(ALREADY_RUNNING):
            running.append(svc.name)
        else:
            log(f"  {svc.name}: {result}")
    return running


def down(services: Sequence[Service], log: Callable[[str], None] = print) -> None:
    """Stop services in reverse order; a failure to stop one does not keep the others running."""
    errors: list[str] = []
    for svc in reversed(services):
        try:
            log(f"  {svc.name}: {stop(svc)}")
        except (OSError, ServiceError) as exc:
            errors.append(f"{svc.name}: {exc}")
    if errors:
        raise ServiceError("; ".join(errors))
