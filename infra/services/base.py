"""What every embedded service declares: how to prepare it, how to launch it, and how to tell it is healthy."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from infra.settings import StackSettings


class ServiceError(RuntimeError):
    """A service could not be prepared, started or checked. The message names the service and its log."""


@dataclass(frozen=True)
class Launch:
    """One foreground process: the supervisor owns its pid and its whole process group."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    user: str | None = None  # run as this OS user (PostgreSQL refuses to run as root)


class Service:
    """Base class of one embedded service. Subclasses set ``name``/``ports`` and implement ``launch``."""

    name: str = ""
    #: bundles of infra/artifacts.toml this service needs on disk
    bundles: tuple[str, ...] = ()
    startup_timeout: float = 120.0
    stop_timeout: float = 30.0

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings

    # --- declared by subclasses --------------------------------------------------------------------------
    @property
    def ports(self) -> tuple[int, ...]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Write configuration and initialise storage; idempotent."""

    def launch(self) -> Launch:
        raise NotImplementedError

    def is_healthy(self) -> bool:
        """Default: every port accepts connections."""
        return all(port_open(self.settings.host, p) for p in self.ports)

    def after_start(self) -> None:
        """Provision what the rest of the stack expects (databases, buckets); idempotent."""

    # --- shared paths --------------------------------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.settings.logs_dir / f"{self.name}.log"

    @property
    def pid_path(self) -> Path:
        return self.settings.run_dir / f"{self.name}.pid"

    @property
    def data_path(self) -> Path:
        return self.settings.data_dir / self.name

    @property
    def conf_path(self) -> Path:
        return self.settings.conf_dir / self.name

    def fail(self, message: str) -> ServiceError:
        return ServiceError(f"{self.name}: {message} (log: {self.log_path})")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something listens on host:port.

    A connect to a closed port in the ephemeral range can succeed by connecting the socket to itself (TCP
    simultaneous open); that is not a listener, so it counts as closed.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            return sock.getsockname() != sock.getpeername()
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when the URL answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def java_binary() -> str:
    """The java launcher, failing with a clear message if Java 17+ is missing."""
    java = shutil.which("java")
    if not java:
        raise ServiceError(
            "Java is not installed: run scripts/bootstrap.sh or `apt-get install openjdk-17-jre-headless`"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    try:
        major = int(out.split('"')[1].split(".")[0])
    except (IndexError, ValueError):
        major = 0
    if major < 17:
        raise ServiceError(f"Java 17 or newer is needed, found: {out.splitlines()[0] if out else 'unknown'}")
    return java


def java_launch(
    main_class: str,
    classpath: str,
    heap_mb: int,
    args: list[str] | None = None,
    props: dict[str, str] | None = None,
    extra_jvm: list[str] | None = None,
) -> list[str]:
    """A capped-heap JVM command line; small services get a small metaspace and serial GC to save memory."""
    argv = [
        java_binary(),
        f"-Xmx{heap_mb}m",
        f"-Xms{min(heap_mb, 128)}m",
        "-XX:+UseSerialGC" if heap_mb <= 512 else "-XX:+UseG1GC",
        "-XX:TieredStopAtLevel=1" if heap_mb <= 256 else "-XX:+TieredCompilation",
        "-Djava.net.preferIPv4Stack=true",
        *(extra_jvm or []),
        *(f"-D{k}={v}" for k, v in (props or {}).items()),
        "-cp",
        classpath,
        main_class,
        *(args or []),
    ]
    return argv


def process_start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat: the process start time in clock ticks since boot."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces; it is wrapped in parentheses
    return stat.rsplit(")", 1)[1].split()[19]


def read_pid(service: Service) -> int | None:
    """The pid of the service's process if the pid file still describes a live process, else None."""
    try:
        record = json.loads(service.pid_path.read_text())
    except (OSError, ValueError):
        return None
    pid = int(record.get("pid", 0))
    if pid > 0 and process_start_time(pid) == record.get("start_time") and not _is_dead(pid):
        return pid
    return None


def _is_dead(pid: int) -> bool:
    """A zombie (exited, not yet reaped by its parent) or a dead task still listed in /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def render_text(template: str, **values: object) -> str:
    """``infra/templates/<template>`` with its ``$name`` placeholders filled; unknown names are an error."""
    from string import Template

    return Template((TEMPLATES / template).read_text()).substitute({k: str(v) for k, v in values.items()})


def render(template: str, dest: Path, **values: object) -> Path:
    """Fill ``infra/templates/<template>`` (``$name`` placeholders) into ``dest``; unknown names are an error."""
    text = render_text(template, **values)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest
