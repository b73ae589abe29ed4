"""What the Flink client hands Flink's CLI (no cluster): the jobs' JVM functions uploaded with every job, the
connector jars too for any cluster but the stack's, the savepoint to restore, and the savepoint a stop reports."""

import subprocess
from pathlib import Path

import pytest

from infra.settings import StackSettings
from lineage_assets.flink import client as client_module
from lineage_assets.flink.client import FlinkClient, FlinkError

SUBMITTED = "Job has been submitted with JobID 0123456789abcdef0123456789abcdef\n"


@pytest.fixture
def cli(monkeypatch):
    calls = []

    def fake(settings, action, *args, timeout=300.0, env=None):
        calls.append((action, list(args), env))
        out = SUBMITTED if action == "run" else "Savepoint completed. Path: file:/sp/savepoint-1\n"
        return subprocess.CompletedProcess([action, *args], 0, out, "")

    monkeypatch.setattr(client_module, "flink_cli", fake)
    jars = [Path("/jars/flink-sql-connector-kafka.jar"), Path("/jars/iceberg-flink-runtime.jar")]
    monkeypatch.setattr(client_module, "job_jars", lambda settings: jars)
    monkeypatch.setattr(client_module, "job_jar_archive", lambda settings: Path("/lab/flink-client/job-jars.jar"))
    monkeypatch.setattr(client_module, "order_functions_jar", lambda settings: Path("/jars/order-functions-0.1.0.jar"))
    return calls


def test_an_external_cluster_gets_the_connector_jars_uploaded_with_the_job(cli):
    client = FlinkClient(StackSettings(external_flink="http://127.0.0.1:8095"))
    jid = client.submit_python("/jobs/job.py", "--x", "1", py_files=("/jobs/a.py", "/jobs/b.py"), savepoint="file:/s")
    assert jid == "0123456789abcdef0123456789abcdef"
    ((action, args, _),) = cli
    assert action == "run" and args[0] == "-d"
    assert args[args.index("-j") + 1] == "/lab/flink-client/job-jars.jar", "a job jar whose lib/ the CLI uploads"
    assert "-D" not in args, "Flink's CLI drops pipeline.jars for a Python job"
    assert args[args.index("-s") + 1] == "file:/s"
    assert "-n" in args, "state of operators a new version dropped does not block the upgrade"
    assert args[args.index("-pyfs") + 1] == "/jobs/a.py,/jobs/b.py"
    assert args[-4:] == ["-py", "/jobs/job.py", "--x", "1"]


def test_the_stack_cluster_has_the_connectors_in_lib_and_gets_only_the_functions_uploaded(cli):
    FlinkClient(StackSettings()).submit_python("/jobs/job.py")
    ((_, args, _),) = cli
    assert args[args.index("-j") + 1] == "/jars/order-functions-0.1.0.jar"
    assert "-s" not in args and "-n" not in args


def test_unbuilt_functions_are_a_clear_error(cli, monkeypatch):
    monkeypatch.setattr(client_module, "order_functions_jar", lambda settings: None)
    with pytest.raises(FlinkError, match="artifacts resolve flink-order-functions"):
        FlinkClient(StackSettings()).submit_python("/jobs/job.py")


def test_an_external_cluster_without_resolved_jars_is_a_clear_error(cli, monkeypatch):
    monkeypatch.setattr(client_module, "job_jars", lambda settings: [])
    with pytest.raises(FlinkError, match="artifacts resolve flink-jars"):
        FlinkClient(StackSettings(external_flink="http://jm:8081")).submit_python("/jobs/job.py")


def test_stop_writes_the_savepoint_to_the_stack_dir_or_the_external_clusters_own(cli, tmp_path):
    assert FlinkClient(StackSettings(home=tmp_path)).stop_with_savepoint("j1") == "file:/sp/savepoint-1"
    FlinkClient(StackSettings(external_flink="http://jm:8081")).stop_with_savepoint("j2")
    chosen_dir = StackSettings(external_flink="http://jm:8081", flink_savepoint_dir="s3://sp/")
    FlinkClient(chosen_dir).stop_with_savepoint("j3")
    stack, external, chosen = (args for _, args, _ in cli)
    assert stack == ["--savepointPath", f"file://{tmp_path / 'data' / 'flink' / 'savepoints'}", "j1"]
    assert external == ["j2"], "the external cluster's state.savepoints.dir"
    assert chosen == ["--savepointPath", "s3://sp/", "j3"]


def test_a_cli_that_does_not_end_in_time_is_a_flink_error_naming_the_cluster(monkeypatch):
    def hung(settings, action, *args, timeout=300.0, env=None):
        raise subprocess.TimeoutExpired(["flink", action], timeout)

    monkeypatch.setattr(client_module, "flink_cli", hung)
    settings = StackSettings()
    with pytest.raises(FlinkError, match=r"`flink stop` against http://127\.0\.0\.1:8081 did not end in 7 s"):
        FlinkClient(settings).stop_with_savepoint("abc", timeout=7)
