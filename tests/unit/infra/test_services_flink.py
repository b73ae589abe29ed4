"""The Flink session cluster's FLINK_HOME and config (the stack's and a second cluster's) and the CLI's target, with
no cluster running."""

from pathlib import Path

import pytest
import yaml

from infra.services import flink
from infra.services.base import ServiceError
from infra.services.flink import FlinkLayout, assemble, cluster_address, flink_cli, flink_config_text, stack_layout
from infra.settings import StackSettings

JAVA_OPTS = "--add-opens=java.base/java.lang=ALL-UNNAMED"


def layout(tmp_path: Path, **overrides) -> FlinkLayout:
    values = {
        "home": tmp_path / "flink",
        "data_dir": tmp_path / "data",
        "log_dir": tmp_path / "log",
        "host": "127.0.0.1",
        "rpc_port": 6133,
        "rest_port": 8095,
        "jobmanager_mb": 768,
        "taskmanager_mb": 1536,
        "python": tmp_path / "venv" / "bin" / "python",
        "slots": 6,
        "metaspace_mb": 384,
    }
    return FlinkLayout(**{**values, **overrides})


def test_the_stack_config_keeps_its_ports_slots_and_the_openlineage_listener(tmp_path):
    settings = StackSettings(home=tmp_path)
    config = yaml.safe_load(flink_config_text(stack_layout(settings), JAVA_OPTS))
    assert config["rest.port"] == 8081 and config["jobmanager.rpc.port"] == 6123
    assert config["taskmanager.numberOfTaskSlots"] == 8
    assert config["taskmanager.memory.jvm-metaspace.size"] == "768m"
    assert config["taskmanager.memory.process.size"] == f"{settings.flink_taskmanager_mb}m"
    assert config["execution.job-status-changed-listeners"].startswith("io.openlineage.flink.listener.")
    assert config["openlineage.transport.location"] == str(tmp_path / "data" / "openlineage" / "flink-listener.jsonl")
    assert config["openlineage.job.namespace"] == "lineage-lab"
    assert config["execution.checkpointing.dir"] == f"file://{tmp_path / 'data' / 'flink' / 'checkpoints'}"
    assert config["state.savepoints.dir"] == f"file://{tmp_path / 'data' / 'flink' / 'savepoints'}"
    assert config["env.java.opts.all"] == JAVA_OPTS
    # the CLI alone (it plans and submits a job, then exits) gets the short-job options
    assert config["env.java.opts.client"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def test_a_cluster_without_the_listener_jar_gets_no_listener_config(tmp_path):
    text = flink_config_text(layout(tmp_path), JAVA_OPTS)
    config = yaml.safe_load(text)
    # no CLI options: no key at all (Flink's scripts would hand the JVM an empty argument, taken for its main class)
    assert "env.java.opts.client" not in config
    assert not any(key.startswith(("openlineage.", "execution.job-status-changed")) for key in config)
    assert "no OpenLineage listener" in text
    assert config["rest.port"] == 8095 and config["rest.bind-address"] == "127.0.0.1"
    assert config["jobmanager.rpc.port"] == 6133
    assert config["taskmanager.numberOfTaskSlots"] == 6
    assert config["jobmanager.memory.process.size"] == "768m"
    assert config["taskmanager.memory.process.size"] == "1536m"
    assert config["taskmanager.memory.jvm-metaspace.size"] == "384m"
    assert config["execution.checkpointing.dir"] == f"file://{tmp_path / 'data' / 'checkpoints'}"
    assert config["state.savepoints.dir"] == f"file://{tmp_path / 'data' / 'savepoints'}"
    assert config["python.executable"] == str(tmp_path / "venv" / "bin" / "python")


def fake_distribution(root: Path) -> Path:
    """The parts of the PyFlink wheel assemble() uses."""
    for sub, names in {
        "bin": ["flink", "jobmanager.sh"],
        "lib": ["flink-dist-2.0.0.jar"],
        "opt": ["flink-python.jar"],
    }.items():
        (root / sub).mkdir(parents=True)
        for name in names:
            (root / sub / name).write_text("")
    (root / "conf").mkdir()
    for name in ("log4j-console.properties", "log4j-cli.properties", "logback-console.xml"):
        (root / "conf" / name).write_text("")
    (root / "conf" / "config.yaml").write_text(yaml.safe_dump({"env": {"java": {"opts": {"all": JAVA_OPTS}}}}))
    return root


def test_assemble_links_the_wheel_and_only_the_layouts_own_jars_and_renders_its_config(tmp_path):
    dist = fake_distribution(tmp_path / "pyflink")
    connector = tmp_path / "jars" / "flink-sql-connector-kafka.jar"
    connector.parent.mkdir()
    connector.write_text("")
    bare = layout(tmp_path / "b")
    assemble(dist, bare)
    assert sorted(p.name for p in (bare.home / "lib").iterdir()) == ["flink-dist-2.0.0.jar"]
    assert (bare.home / "opt" / "flink-python.jar").resolve() == dist / "opt" / "flink-python.jar"
    assert yaml.safe_load((bare.home / "conf" / "config.yaml").read_text())["rest.port"] == 8095
    for d in ("tmp", "pid", "checkpoints", "savepoints"):
        assert (bare.data_dir / d).is_dir()

    with_jars = layout(tmp_path / "c", lib_jars=(connector,))
    assemble(dist, with_jars)
    assemble(dist, with_jars)  # again, as on every start
    assert sorted(p.name for p in (with_jars.home / "lib").iterdir()) == ["flink-dist-2.0.0.jar", connector.name]


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://jm:8081", "jm:8081"),
        ("http://127.0.0.1:8095/", "127.0.0.1:8095"),
        ("http://flink.example", "flink.example:8081"),
        ("https://flink.example", "flink.example:443"),
    ],
)
def test_an_external_cluster_is_addressed_by_host_and_port_of_its_url(url, address):
    assert cluster_address(StackSettings(external_flink=url)) == address


def test_the_stack_cluster_needs_no_address_and_a_bad_url_is_a_clear_error():
    assert cluster_address(StackSettings()) is None
    with pytest.raises(ServiceError, match="not a URL like http://host:8081"):
        cluster_address(StackSettings(external_flink="jobmanager:8081"))


def test_the_cli_targets_an_external_cluster_with_m_and_a_client_only_config(tmp_path, monkeypatch):
    (tmp_path / "flink" / "bin").mkdir(parents=True)
    (tmp_path / "flink" / "bin" / "flink").write_text("")
    dist = fake_distribution(tmp_path / "pyflink")
    monkeypatch.setattr(flink, "pyflink_dir", lambda settings: dist)
    calls = []
    monkeypatch.setattr("subprocess.run", lambda argv, **kw: calls.append((argv, kw["env"])))
    external = StackSettings(home=tmp_path, external_flink="http://127.0.0.1:8095")
    flink_cli(external, "stop", "abc", env={"X": "1"})
    flink_cli(StackSettings(home=tmp_path), "stop", "abc")
    (to_external, env), (to_stack, stack_env) = calls
    assert to_external[1:] == ["stop", "-m", "127.0.0.1:8095", "abc"] and env["X"] == "1"
    assert to_stack[1:] == ["stop", "abc"]
    assert stack_env["FLINK_CONF_DIR"] == str(tmp_path / "flink" / "conf")
    assert env["FLINK_CONF_DIR"] == str(tmp_path / "flink-client" / "conf")
    client = yaml.safe_load((tmp_path / "flink-client" / "conf" / "config.yaml").read_text())
    assert not any(k.startswith(("state.", "execution.checkpointing", "taskmanager.", "jobmanager.")) for k in client)
    python = str(external.flink_venv / "bin" / "python")
    assert client["python.client.executable"] == python
    assert client["python.executable"] == python, "Flink reads it from the job's config, never the cluster's"
    assert client["openlineage.transport.location"].endswith("flink-listener.jsonl"), "the client sends the START"
    assert client["env.java.opts.client"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC", "the CLI's own JVM"
    assert (tmp_path / "flink-client" / "conf" / "log4j-cli.properties").exists()


def test_the_job_jar_archive_holds_connectors_and_functions_under_lib_but_not_the_listener(tmp_path, monkeypatch):
    import zipfile

    bundle = tmp_path / "jars" / "flink-jars"
    bundle.mkdir(parents=True)
    for name in ("flink-sql-connector-kafka.jar", "iceberg-flink-runtime.jar", "openlineage-flink-1.53.0.jar"):
        (bundle / name).write_bytes(name.encode())
    functions = tmp_path / "jars" / "flink-order-functions" / "order-functions-0.1.0.jar"
    functions.parent.mkdir(parents=True)
    functions.write_bytes(b"rule v1")
    monkeypatch.setenv("LINEAGE_LAB_JARS_DIR", str(tmp_path / "jars"))
    settings = StackSettings(home=tmp_path / "lab")
    archive = flink.job_jar_archive(settings)
    with zipfile.ZipFile(archive) as jar:
        assert sorted(jar.namelist()) == [
            "META-INF/MANIFEST.MF",
            "lib/flink-sql-connector-kafka.jar",
            "lib/iceberg-flink-runtime.jar",
            "lib/order-functions-0.1.0.jar",
        ]
        assert jar.read("lib/iceberg-flink-runtime.jar") == b"iceberg-flink-runtime.jar"
    built = archive.stat().st_mtime_ns
    assert flink.job_jar_archive(settings).stat().st_mtime_ns == built, "reused while the bundle is unchanged"
    (bundle / "iceberg-flink-runtime.jar").write_bytes(b"a newer version")
    with zipfile.ZipFile(flink.job_jar_archive(settings)) as jar:
        assert jar.read("lib/iceberg-flink-runtime.jar") == b"a newer version"
    functions.write_bytes(b"rule v2")  # rebuilt: same name, same size
    with zipfile.ZipFile(flink.job_jar_archive(settings)) as jar:
        assert jar.read("lib/order-functions-0.1.0.jar") == b"rule v2"
    assert flink.flink_env(StackSettings(home=tmp_path))["AWS_REQUEST_CHECKSUM_CALCULATION"] == "when_required"
