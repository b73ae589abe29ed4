"""Which savepoint a deployment starts from (no cluster): the old version's when it replaces a running job, the one
given in ``restore_from`` when the job does not run on the target cluster (moving between clusters), none else."""

from types import SimpleNamespace

from lineage_assets.flink.client import FlinkJob
from lineage_assets.flink.deploy import VERSION_PARAMETER, FlinkJobSpec, check_running
from lineage_assets.flink.iceberg_ingestion import IcebergIngestionConfig
from lineage_assets.flink.supplier_stats import SupplierStatsConfig

SPEC = FlinkJobSpec("iceberg-ingestion", None)  # type: ignore[arg-type]  # the script is not read here


class FakeClient:
    url = "http://127.0.0.1:8095"

    def __init__(self, running: FlinkJob | None, version: str = "v1"):
        self.running, self.version, self.stopped = running, version, []

    def active(self, name):
        return self.running

    def user_config(self, jid):
        return {VERSION_PARAMETER: self.version}

    def stop_with_savepoint(self, jid):
        self.stopped.append(jid)
        return f"file:/sp/{jid}"


class Log:
    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(("info", text))

    def warning(self, text):
        self.lines.append(("warning", text))


def context():
    return SimpleNamespace(
        log=Log(), asset_key=None, instance=SimpleNamespace(get_latest_materialization_event=lambda key: None)
    )


def test_a_job_not_running_here_starts_from_the_given_savepoint():
    ctx = context()
    other = "file:/other/savepoint-7"
    assert check_running(ctx, FakeClient(None), SPEC, "v1", other) == (None, other)
    assert "starting it from file:/other/savepoint-7" in ctx.log.lines[0][1]
    assert check_running(context(), FakeClient(None), SPEC, "v1") == (None, None), "fresh without restore_from"


def test_a_running_job_keeps_its_own_state_and_restore_from_is_ignored_with_a_warning():
    job = FlinkJob("j1", "iceberg-ingestion", "RUNNING", 0)
    ctx = context()
    unchanged, savepoint = check_running(ctx, FakeClient(job), SPEC, "v1", "file:/other/savepoint-7")
    assert unchanged is not None and unchanged.jid == "j1" and savepoint is None
    assert ctx.log.lines[0][0] == "warning" and "ignored" in ctx.log.lines[0][1]

    changed = FakeClient(job, version="v0")
    assert check_running(context(), changed, SPEC, "v1", "file:/other/savepoint-7") == (None, "file:/sp/j1")
    assert changed.stopped == ["j1"], "a changed job is still redeployed from its own savepoint"


def test_both_deploy_configs_take_a_savepoint_to_restore_from():
    assert IcebergIngestionConfig().restore_from == "" and SupplierStatsConfig().restore_from == ""
    assert IcebergIngestionConfig(restore_from="file:/sp/1").restore_from == "file:/sp/1"
    assert SupplierStatsConfig(restore_from="file:/sp/2").restore_from == "file:/sp/2"
