"""Flink 2.0 session cluster from the PyFlink distribution on PyPI (apache-flink in .venv-flink).

The wheel ships Flink's scripts and jars but no connectors. ``flink_home`` assembles a FLINK_HOME in the state
directory without touching site-packages: bin/ copied (config.sh resolves its own location with ``pwd -P``),
lib/ and opt/ as links to the wheel's jars plus the connector jars of the ``flink-jars`` bundle, conf/ rendered.
JobManager and TaskManager each run in the foreground so the supervisor owns their pids.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from infra.artifacts import bundle_dir
from infra.services.base import Launch, Service, ServiceError, render
from infra.settings import StackSettings

BUNDLE = "flink-jars"
OPENLINEAGE_NAMESPACE = "lineage-lab"


def pyflink_dir(settings: StackSettings) -> Path:
    matches = sorted(settings.flink_venv.glob("lib/python3*/site-packages/pyflink"))
    if not matches or not (matches[0] / "bin" / "jobmanager.sh").exists():
        raise ServiceError(
            f"flink: PyFlink is not installed in {settings.flink_venv}; run scripts/bootstrap.sh "
            "(it installs flink_jobs/requirements.txt there)"
        )
    return matches[0]


def flink_home(settings: StackSettings) -> Path:
    return settings.home / "flink"


def flink_env(settings: StackSettings) -> dict[str, str]:
    """Environment for Flink's scripts (cluster daemons and the ``flink`` CLI alike)."""
    home = flink_home(settings)
    return {
        "FLINK_HOME": str(home),
        "FLINK_CONF_DIR": str(home / "conf"),
        "FLINK_LIB_DIR": str(home / "lib"),
        "FLINK_OPT_DIR": str(home / "opt"),
        "FLINK_PLUGINS_DIR": str(home / "plugins"),
        "FLINK_LOG_DIR": str(settings.logs_dir / "flink"),
        "FLINK_IDENT_STRING": "lineage-lab",
        **settings.aws_sdk_env(),
    }


def openlineage_events_file(settings: StackSettings) -> Path:
    return settings.data_dir / "openlineage" / "flink-listener.jsonl"


def assemble_flink_home(settings: StackSettings) -> Path:
    """(Re)build FLINK_HOME: cheap, so it is redone on every start to follow upgrades of either source."""
    dist = pyflink_dir(settings)
    home = flink_home(settings)
    for sub in ("bin", "lib", "opt", "plugins"):
        shutil.rmtree(home / sub, ignore_errors=True)
    shutil.copytree(dist / "bin", home / "bin")
    for sub in ("lib", "opt"):
        (home / sub).mkdir(parents=True)
        for jar in sorted((dist / sub).glob("*.jar")):
            (home / sub / jar.name).symlink_to(jar)
    (home / "plugins").mkdir()
    for jar in sorted(bundle_dir(settings.jars_dir, BUNDLE).glob("*.jar")):
        (home / "lib" / jar.name).symlink_to(jar)
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("log4j-console.properties", "log4j-cli.properties", "logback-console.xml"):
        shutil.copy2(dist / "conf" / name, conf / name)
    # the JVM flags the wheel's own config carries (module opens that Flink needs on Java 17)
    shipped = yaml.safe_load((dist / "conf" / "config.yaml").read_text())
    java_opts = shipped["env"]["java"]["opts"]["all"]
    data = settings.data_dir / "flink"
    for d in (data / "tmp", data / "pid", data / "checkpoints", data / "savepoints", settings.logs_dir / "flink"):
        d.mkdir(parents=True, exist_ok=True)
    openlineage_events_file(settings).parent.mkdir(parents=True, exist_ok=True)
    render(
        "flink-config.yaml",
        conf / "config.yaml",
        java_opts=java_opts,
        log_dir=settings.logs_dir / "flink",
        pid_dir=data / "pid",
        host=settings.host,
        rpc_port=settings.flink_rpc_port,
        rest_port=settings.flink_rest_port,
        jobmanager_mb=settings.flink_jobmanager_mb,
        taskmanager_mb=settings.flink_taskmanager_mb,
        tmp_dir=data / "tmp",
        checkpoints=f"file://{data / 'checkpoints'}",
        savepoints=f"file://{data / 'savepoints'}",
        python=settings.flink_venv / "bin" / "python",
        openlineage_file=openlineage_events_file(settings),
        openlineage_namespace=OPENLINEAGE_NAMESPACE,
    )
    return home


def rest_overview(settings: StackSettings) -> dict | None:
    try:
        with urllib.request.urlopen(f"{settings.flink_rest_url}/overview", timeout=2) as resp:
            return json.load(resp)
    except (urllib.error.URLError, OSError, ValueError):
        return None


class FlinkJobManager(Service):
    name = "flink-jobmanager"
    bundles = (BUNDLE,)
    startup_timeout = 120.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.flink_rest_port, self.settings.flink_rpc_port)

    def prepare(self) -> None:
        assemble_flink_home(self.settings)

    def launch(self) -> Launch:
        home = flink_home(self.settings)
        return Launch([str(home / "bin" / "jobmanager.sh"), "start-foreground"], env=flink_env(self.settings))

    def is_healthy(self) -> bool:
        return rest_overview(self.settings) is not None


class FlinkTaskManager(Service):
    name = "flink-taskmanager"
    bundles = (BUNDLE,)
    startup_timeout = 120.0

    @property
    def ports(self) -> tuple[int, ...]:
        return ()  # ephemeral ports on the stack host; health comes from the JobManager's view

    def launch(self) -> Launch:
        home = flink_home(self.settings)
        return Launch([str(home / "bin" / "taskmanager.sh"), "start-foreground"], env=flink_env(self.settings))

    def is_healthy(self) -> bool:
        overview = rest_overview(self.settings)
        return bool(overview and overview.get("taskmanagers", 0) >= 1)


def flink_cli(settings: StackSettings, *args: str, timeout: float = 300.0):
    """Run Flink's CLI (``bin/flink``) against the stack's session cluster; returns the CompletedProcess."""
    import os
    import subprocess

    home = flink_home(settings)
    if not (home / "bin" / "flink").exists():
        raise ServiceError("flink: FLINK_HOME is not assembled yet; run `lineage-lab stack up`")
    env = {**os.environ, **flink_env(settings)}
    return subprocess.run(
        [str(home / "bin" / "flink"), *args], capture_output=True, text=True, env=env, timeout=timeout
    )
