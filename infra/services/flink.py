"""Flink 2.0 session cluster from the PyFlink distribution on PyPI (apache-flink in .venv-flink).

The wheel ships Flink's scripts and jars but no connectors. ``assemble`` builds a cluster's FLINK_HOME (its
``FlinkLayout``) without touching site-packages: bin/ copied (config.sh resolves its own location with ``pwd -P``),
lib/ and opt/ as links to the wheel's jars plus the layout's own (the stack's: the ``flink-jars`` bundle), conf/
rendered. JobManager and TaskManager each run in the foreground so the supervisor owns their pids. A second cluster
for tests and demos uses the same pieces (tests/support/flink_cluster.py).

Jobs reach a session cluster other than the stack's (LINEAGE_LAB_EXTERNAL_FLINK) through the CLI with ``-m``, a
client-only conf/ and their connector jars uploaded with each submission (``job_jar_archive``).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from infra.artifacts import bundle_dir
from infra.services.base import Launch, Service, ServiceError, render_text
from infra.settings import StackSettings

BUNDLE = "flink-jars"
#: the jobs' own JVM code (flink_jobs/order-functions), uploaded with each job
ORDER_FUNCTIONS_BUNDLE = "flink-order-functions"
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


@dataclass(frozen=True)
class FlinkLayout:
    """Where one Flink session cluster keeps its FLINK_HOME, state and logs, and what its config says: the stack's
    (``stack_layout``) or another one, e.g. the second session cluster of tests/support/flink_cluster.py."""

    home: Path
    #: tmp/, pid/, checkpoints/ and savepoints/ of the cluster
    data_dir: Path
    log_dir: Path
    #: the address of this process (a TaskManager's advertised address)
    host: str
    rpc_port: int
    rest_port: int
    jobmanager_mb: int
    taskmanager_mb: int
    python: Path
    slots: int = 8
    #: PyFlink jobs load their classes per job: a few deploy/cancel cycles exhaust the default 256 MiB
    metaspace_mb: int = 768
    #: linked into lib/ besides the wheel's own jars (the stack's cluster: the flink-jars bundle)
    lib_jars: tuple[Path, ...] = ()
    #: the OpenLineage listener's event file; None: no listener configured (its jar must be in lib_jars otherwise)
    openlineage_file: Path | None = None
    openlineage_namespace: str = OPENLINEAGE_NAMESPACE
    ident: str = "lineage-lab"
    #: what the daemons bind; empty: ``host``
    bind_host: str = ""
    #: the JobManager's address (RPC and REST); empty: ``host`` (JobManager and TaskManager on one machine)
    jobmanager_host: str = ""
    #: JVM options of the CLI only (``env.java.opts.client``), which plans and submits a job and exits
    client_java_opts: str = ""

    @property
    def checkpoints(self) -> str:
        return f"file://{self.data_dir / 'checkpoints'}"

    @property
    def savepoints(self) -> str:
        return f"file://{self.data_dir / 'savepoints'}"

    def env(self) -> dict[str, str]:
        """Environment for Flink's scripts (cluster daemons and the ``flink`` CLI alike)."""
        return {
            "FLINK_HOME": str(self.home),
            "FLINK_CONF_DIR": str(self.home / "conf"),
            "FLINK_LIB_DIR": str(self.home / "lib"),
            "FLINK_OPT_DIR": str(self.home / "opt"),
            "FLINK_PLUGINS_DIR": str(self.home / "plugins"),
            "FLINK_LOG_DIR": str(self.log_dir),
            "FLINK_IDENT_STRING": self.ident,
        }


def client_java_opts_line(opts: str) -> str:
    """The config line of the CLI's own JVM options (``env.java.opts.client``), or a comment when there are none:
    Flink's scripts pass an empty value on as an empty argument, which the JVM takes for its main class."""
    if not opts.strip():
        return "# the CLI's JVM: the JVM's defaults (no env.java.opts.client)"
    return f'# the CLI only: it plans and submits a job, then exits\nenv.java.opts.client: "{opts}"'


def openlineage_events_file(settings: StackSettings) -> Path:
    return settings.data_dir / "openlineage" / "flink-listener.jsonl"


def stack_layout(settings: StackSettings) -> FlinkLayout:
    """The stack's session cluster: connector jars in lib/, the OpenLineage listener configured."""
    return FlinkLayout(
        home=flink_home(settings),
        data_dir=settings.data_dir / "flink",
        log_dir=settings.logs_dir / "flink",
        host=settings.host,
        bind_host=settings.listen_host,
        jobmanager_host=urlsplit(settings.flink_rest_url).hostname or settings.host,
        rpc_port=settings.flink_rpc_port,
        rest_port=settings.flink_rest_port,
        jobmanager_mb=settings.flink_jobmanager_mb,
        taskmanager_mb=settings.flink_taskmanager_mb,
        python=settings.flink_venv / "bin" / "python",
        lib_jars=tuple(connector_jars(settings)),
        openlineage_file=openlineage_events_file(settings),
        client_java_opts=settings.job_client_java_options,
    )


def flink_env(settings: StackSettings) -> dict[str, str]:
    """Environment for Flink's scripts of the stack's cluster (daemons and the ``flink`` CLI alike)."""
    return {**stack_layout(settings).env(), **settings.aws_sdk_env()}


def flink_config_text(layout: FlinkLayout, java_opts: str) -> str:
    """The cluster's conf/config.yaml (infra/templates/flink-config.yaml); with the OpenLineage listener's lines
    only when the layout has a listener file."""
    if layout.openlineage_file is not None:
        listener = render_text(
            "flink-openlineage-listener.yaml",
            openlineage_file=layout.openlineage_file,
            openlineage_namespace=layout.openlineage_namespace,
        )
    else:
        listener = "# no OpenLineage listener: its jar (openlineage-flink) is not in this cluster's lib/\n"
    return render_text(
        "flink-config.yaml",
        java_opts=java_opts,
        client_java_opts_line=client_java_opts_line(layout.client_java_opts),
        log_dir=layout.log_dir,
        pid_dir=layout.data_dir / "pid",
        host=layout.host,
        bind_host=layout.bind_host or layout.host,
        jobmanager_host=layout.jobmanager_host or layout.host,
        rpc_port=layout.rpc_port,
        rest_port=layout.rest_port,
        jobmanager_mb=layout.jobmanager_mb,
        taskmanager_mb=layout.taskmanager_mb,
        slots=layout.slots,
        metaspace_mb=layout.metaspace_mb,
        tmp_dir=layout.data_dir / "tmp",
        checkpoints=layout.checkpoints,
        savepoints=layout.savepoints,
        python=layout.python,
        openlineage_listener=listener,
    )


def assemble(dist: Path, layout: FlinkLayout) -> Path:
    """(Re)build the layout's FLINK_HOME from the PyFlink distribution ``dist``: cheap, so it is redone on every
    start to follow upgrades of either source."""
    home = layout.home
    for sub in ("bin", "lib", "opt", "plugins"):
        shutil.rmtree(home / sub, ignore_errors=True)
    shutil.copytree(dist / "bin", home / "bin")
    for sub in ("lib", "opt"):
        (home / sub).mkdir(parents=True)
        for jar in sorted((dist / sub).glob("*.jar")):
            (home / sub / jar.name).symlink_to(jar)
    (home / "plugins").mkdir()
    for jar in layout.lib_jars:
        (home / "lib" / jar.name).symlink_to(jar)
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("log4j-console.properties", "log4j-cli.properties", "logback-console.xml"):
        shutil.copy2(dist / "conf" / name, conf / name)
    # the JVM flags the wheel's own config carries (module opens that Flink needs on Java 17)
    shipped = yaml.safe_load((dist / "conf" / "config.yaml").read_text())
    java_opts = shipped["env"]["java"]["opts"]["all"]
    data = layout.data_dir
    for d in (data / "tmp", data / "pid", data / "checkpoints", data / "savepoints", layout.log_dir):
        d.mkdir(parents=True, exist_ok=True)
    if layout.openlineage_file is not None:
        layout.openlineage_file.parent.mkdir(parents=True, exist_ok=True)
    (conf / "config.yaml").write_text(flink_config_text(layout, java_opts))
    return home


def assemble_flink_home(settings: StackSettings) -> Path:
    """(Re)build the stack's FLINK_HOME."""
    return assemble(pyflink_dir(settings), stack_layout(settings))


def rest_overview(settings: StackSettings) -> dict | None:
    try:
        with urllib.request.urlopen(f"{settings.flink_rest_url}/overview", timeout=2) as resp:
            return json.load(resp)
    except (urllib.error.URLError, OSError, ValueError):
        return None


class FlinkJobManager(Service):
    name = "flink-jobmanager"
    bundles = (BUNDLE, ORDER_FUNCTIONS_BUNDLE)
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
    bundles = (BUNDLE, ORDER_FUNCTIONS_BUNDLE)
    startup_timeout = 120.0

    @property
    def ports(self) -> tuple[int, ...]:
        return ()  # ephemeral ports on the stack host; health comes from the JobManager's view

    def prepare(self) -> None:
        """Beside its JobManager the home is already there; on a machine (or container) of its own it is built."""
        if not (flink_home(self.settings) / "bin" / "taskmanager.sh").exists():
            assemble_flink_home(self.settings)

    def launch(self) -> Launch:
        home = flink_home(self.settings)
        return Launch([str(home / "bin" / "taskmanager.sh"), "start-foreground"], env=flink_env(self.settings))

    def is_healthy(self) -> bool:
        overview = rest_overview(self.settings)
        return bool(overview and overview.get("taskmanagers", 0) >= 1)


def cluster_address(settings: StackSettings) -> str | None:
    """host:port of an external session cluster's REST endpoint (for the CLI's ``-m``); None for the stack's."""
    if not settings.external_flink:
        return None
    from urllib.parse import urlsplit

    url = urlsplit(settings.external_flink)
    if not url.hostname:
        raise ServiceError(f"LINEAGE_LAB_EXTERNAL_FLINK={settings.external_flink!r} is not a URL like http://host:8081")
    return f"{url.hostname}:{url.port or (443 if url.scheme == 'https' else 8081)}"


def connector_jars(settings: StackSettings) -> list[Path]:
    """The ``flink-jars`` bundle: the connectors and the OpenLineage listener, all in the stack's lib/."""
    return sorted(bundle_dir(settings.jars_dir, BUNDLE).glob("*.jar"))


def job_jars(settings: StackSettings) -> list[Path]:
    """The connector jars the jobs need (not the OpenLineage listener: it runs in the client and the cluster, never
    in a job). The stack's cluster has them in lib/; any other cluster gets them uploaded with each job
    (``job_jar_archive``)."""
    return [jar for jar in connector_jars(settings) if not jar.name.startswith("openlineage-flink")]


def order_functions_jar(settings: StackSettings) -> Path | None:
    """The jobs' own JVM code, the ``flink-order-functions`` bundle (built by Maven from flink_jobs/order-functions);
    None while it is not built."""
    return next(iter(sorted(bundle_dir(settings.jars_dir, ORDER_FUNCTIONS_BUNDLE).glob("order-functions-*.jar"))), None)


def job_jar_archive(settings: StackSettings) -> Path:
    """One jar holding ``job_jars`` and the order functions under lib/, for ``flink run -j``: the CLI extracts the
    jars of a job jar's lib/ and uploads each with the job. (Flink 2.0's CLI replaces ``pipeline.jars`` by the job
    jar and its lib/ for a Python job, so ``-D pipeline.jars=...`` never reaches the cluster.) Rebuilt when a jar
    changes."""
    import zipfile

    jars = job_jars(settings)
    functions = order_functions_jar(settings)
    jars += [functions] if functions else []
    archive = settings.home / "flink-client" / "job-jars.jar"
    # size and CRC: a rebuilt order-functions jar may keep its name and its size
    wanted = {f"lib/{jar.name}": (jar.stat().st_size, _crc32(jar)) for jar in jars}
    try:
        with zipfile.ZipFile(archive) as existing:
            held = {i.filename: (i.file_size, i.CRC) for i in existing.infolist() if i.filename.startswith("lib/")}
            if held == wanted:
                return archive
    except (OSError, zipfile.BadZipFile):
        pass
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.{os.getpid()}")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as out:  # jars are compressed already
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: lineage-lab\n")
        for jar in jars:
            out.write(jar, f"lib/{jar.name}")
    partial.replace(archive)
    return archive


def _crc32(path: Path) -> int:
    import zlib

    crc = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def client_conf_dir(settings: StackSettings) -> Path:
    """The CLI's configuration for an external cluster (the stack's own conf/ would configure the jobs too)."""
    return settings.home / "flink-client" / "conf"


def client_config_text(settings: StackSettings, java_opts: str) -> str:
    """Client settings only: the JVM flags, the Python that runs the job's driver, and the OpenLineage listener,
    which sends a job's START from the client when the job is submitted (its jar is in the client's lib/)."""
    listener = render_text(
        "flink-openlineage-listener.yaml",
        openlineage_file=openlineage_events_file(settings),
        openlineage_namespace=OPENLINEAGE_NAMESPACE,
    )
    return render_text(
        "flink-client-config.yaml",
        java_opts=java_opts,
        client_java_opts_line=client_java_opts_line(settings.job_client_java_options),
        python=settings.flink_venv / "bin" / "python",
        cluster_python=settings.flink_cluster_python or settings.flink_venv / "bin" / "python",
        openlineage_listener=listener,
    )


def write_client_conf(settings: StackSettings) -> Path:
    """(Re)write the external cluster's client conf/ (only when it changed: several CLIs may run at once)."""
    dist = pyflink_dir(settings)
    conf = client_conf_dir(settings)
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("log4j-cli.properties", "log4j-console.properties", "logback-console.xml"):
        if not (conf / name).exists():
            shutil.copy2(dist / "conf" / name, conf / name)
    java_opts = yaml.safe_load((dist / "conf" / "config.yaml").read_text())["env"]["java"]["opts"]["all"]
    text = client_config_text(settings, java_opts)
    target = conf / "config.yaml"
    if not target.exists() or target.read_text() != text:
        partial = conf / f".config.yaml.{os.getpid()}"
        partial.write_text(text)
        partial.replace(target)
    openlineage_events_file(settings).parent.mkdir(parents=True, exist_ok=True)
    return conf


def flink_cli(
    settings: StackSettings, action: str, *args: str, timeout: float = 300.0, env: dict[str, str] | None = None
):
    """Run Flink's CLI (``bin/flink ACTION ...``) against the session cluster: the stack's, or the one at
    LINEAGE_LAB_EXTERNAL_FLINK (``-m host:port``, with the client-only conf/ of ``write_client_conf``; the stack's
    FLINK_HOME is assembled for its bin/ and lib/ when the stack never did). ``env`` adds variables for the job's
    Python driver (secrets stay out of the command line). Returns the CompletedProcess."""
    import subprocess

    home = flink_home(settings)
    address = cluster_address(settings)
    if not (home / "bin" / "flink").exists():
        if address is None:
            raise ServiceError("flink: FLINK_HOME is not assembled yet; run `lineage-lab stack up`")
        assemble_flink_home(settings)
    target = ["-m", address] if address else []
    client = {"FLINK_CONF_DIR": str(write_client_conf(settings))} if address else {}
    full_env = {**os.environ, **flink_env(settings), **client, **(env or {})}
    return subprocess.run(
        [str(home / "bin" / "flink"), action, *target, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )
