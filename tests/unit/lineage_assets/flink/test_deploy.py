"""Which savepoint a deployment starts from (no cluster): the old version's when it replaces a running job, the one
given in ``restore_from`` when the job does not run on the target cluster (moving between clusters), none else."""

from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest

from flink_jobs import deployment
from lineage_assets.flink.client import FlinkClient, FlinkJob
from lineage_assets.flink.deploy import VERSION_PARAMETER, FlinkJobSpec, check_running, plan_start
from lineage_assets.flink.iceberg_ingestion_asset import IcebergIngestionConfig
from lineage_assets.flink.supplier_stats_stream_asset import SupplierStatsConfig

SPEC = FlinkJobSpec("iceberg-ingestion", None)  # type: ignore[arg-type]  # the script is not read here


class FakeClient:
    url = "http://127.0.0.1:8095"

    def __init__(self, running: FlinkJob | None, version: str = "v1"):
        self.running, self.version, self.stopped = running, version, []

    def active(self, name):
        return self.running

    def user_config(self, jid):
        return {VERSION_PARAMETER: self.version}

    def stop_with_savepoint(self, jid, name=""):
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
    return SimpleNamespace(log=Log(), asset_key=None, instance=None)


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
    assert unchanged is not None and unchanged.job.jid == "j1" and savepoint is None
    assert ctx.log.lines[0][0] == "warning" and "ignored" in ctx.log.lines[0][1]

    changed = FakeClient(job, version="v0")
    assert check_running(context(), changed, SPEC, "v1", "file:/other/savepoint-7") == (None, "file:/sp/j1")
    assert changed.stopped == ["j1"], "a changed job is still redeployed from its own savepoint"


def test_both_deploy_configs_take_a_savepoint_to_restore_from():
    assert IcebergIngestionConfig().restore_from == "" and SupplierStatsConfig().restore_from == ""
    assert IcebergIngestionConfig(restore_from="file:/sp/1").restore_from == "file:/sp/1"
    assert SupplierStatsConfig(restore_from="file:/sp/2").restore_from == "file:/sp/2"


class StateClient(FakeClient):
    """A cluster that knows one stopped job of the name, with its newest checkpoint and the arguments it ran with."""

    def __init__(self, args: list[str] | None):
        super().__init__(None)
        self.args = args

    def named(self, name):
        return [FlinkJob("old", name, "CANCELED", 5)]

    def latest_state(self, jid):
        return ("s3://bucket/chk-9", 7)

    def user_config(self, jid):
        return {deployment.ARGS: deployment.encode_args(self.args)} if self.args is not None else {}

    def savepoint_dir(self, name=""):
        return ""

    def checkpoint_dir(self, name):
        return ""


ARGS = ["--bootstrap", "b:9092", "--source-topic", "orders", "--group-id", "iceberg-ingestion", "--table", "t"]


def test_a_job_that_does_not_run_starts_from_its_newest_state_when_it_belongs_to_the_same_data():
    start = plan_start(context(), StateClient(ARGS), SPEC, [*ARGS, "--checkpoint-interval", "5 s"], True, False)
    assert start.savepoint == "s3://bucket/chk-9"
    assert "retained checkpoint of job old (canceled)" in start.how


def test_state_of_other_data_is_refused_unless_offsets_are_asked_for():
    other = [a if a != "orders" else "orders-v2" for a in ARGS]
    with pytest.raises(dg.Failure, match="--source-topic 'orders-v2' there, 'orders' now"):
        plan_start(context(), StateClient(other), SPEC, ARGS, True, False)
    ctx = context()
    start = plan_start(ctx, StateClient(other), SPEC, ARGS, True, True)
    assert start.savepoint is None and ctx.log.lines[-1][0] == "warning"


def test_no_state_left_after_a_run_refuses_a_silent_start_from_offsets():
    lost = StateClient(None)
    lost.named = lambda name: []
    with pytest.raises(dg.Failure, match="start_from_offsets: true"):
        plan_start(context(), lost, SPEC, ARGS, True, False)
    assert plan_start(context(), lost, SPEC, ARGS, False, False).how.startswith("first start"), "nothing to lose"
    ctx = context()
    assert "on request" in plan_start(ctx, lost, SPEC, ARGS, True, True).how
    assert ctx.log.lines[-1] == (
        "warning",
        "iceberg-ingestion: start_from_offsets requested: starting from the "
        "committed offsets alone loses the job's state",
    )


def test_arguments_survive_the_job_parameters_round_trip():
    argv = ["--table", "a:b,c", "--version", "x.y", "--group-id", "g"]
    params = deployment.job_parameters("x.y", argv)
    assert params[deployment.VERSION] == "x.y"
    assert deployment.decode_args(params[deployment.ARGS]) == ["--table", "a:b,c", "--group-id", "g"]
    assert ":" not in params[deployment.ARGS] and "," not in params[deployment.ARGS], "Flink's map syntax"
    assert deployment.decode_args("not base64 json") is None


def test_the_current_job_is_the_active_one_else_the_newest():
    jobs = [FlinkJob("a", "n", "CANCELED", 30), FlinkJob("b", "n", "RUNNING", 10), FlinkJob("c", "m", "RUNNING", 50)]
    assert FlinkClient.current_of(jobs, "n").jid == "b"
    assert FlinkClient.current_of(jobs[:1], "n").jid == "a"
    assert FlinkClient.current_of(jobs, "zzz") is None


class ToyConfig(dg.Config):
    checkpoint_interval: str = "5 s"
    restore_from: str = ""
    start_from_offsets: bool = False


class ToySpec(FlinkJobSpec):
    def version(self, settings: str) -> str:
        return f"v<{settings}>"  # the settings text as the version, to read what decides it


class Emitter:
    def __init__(self):
        self.events = []

    def emit(self, event):
        self.events.append(event)


class ToyBuilder:
    def event(self, job, state, run_id, **kw):
        return (job, state.value, "error" in kw)


class ToyFlinkClient:
    url = "http://flink:8081"

    def checkpoint_dir(self, name):
        return "s3://chk"

    def listener_events_file(self):
        return Path("/nonexistent/flink-listener.jsonl")  # no listener: the job's account is unknown

    def user_config(self, jid):
        return {}


def toy_resources(emitter):
    kafka = SimpleNamespace(connection=lambda: "b:9092", registry=lambda: "registry")
    lineage = SimpleNamespace(emitter=lambda: emitter)
    return {"kafka": kafka, "lineage": lineage, "flink": SimpleNamespace(client=lambda: ToyFlinkClient())}


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """A Flink job deployed by the factory with every cluster call replaced: what the factory itself adds."""
    from infra.settings import StackSettings
    from lineage_assets.flink import deploy
    from lineage_assets.kafka.topics import TopicSpec
    from lineage_assets.lineage.identity import Pipeline
    from lineage_assets.tunables import PipelineTunables

    calls = {"steps": []}
    monkeypatch.setattr(ToyFlinkClient, "settings", SimpleNamespace(data_dir=tmp_path), raising=False)  # its lock
    monkeypatch.setattr(deploy, "require_source_topic", lambda kafka, topic, asset: calls["steps"].append(topic))
    monkeypatch.setattr(deploy, "observed_event_builder", lambda pipeline, registry: (ToyBuilder(), None))
    monkeypatch.setattr(deploy, "check_running", lambda *a: (None, None))
    monkeypatch.setattr(deploy, "has_committed_offsets", lambda *a: False)
    monkeypatch.setattr(deploy, "newest_state", lambda client, name: None)  # no savepoint or checkpoint left
    monkeypatch.setattr(deploy, "job_environment", lambda kafka, iceberg=None: {})
    monkeypatch.setattr(deploy, "open_events", lambda name, run_id, *a, **kw: [(name, "START"), (name, "RUNNING")])

    def submit(client, spec, args, version, savepoint, env=None):
        calls["submitted"] = (args, version, savepoint)
        if calls.get("fail"):
            raise deploy.FlinkError("no slots")
        return FlinkJob("j1", spec.name, "CREATED", 1_000)

    monkeypatch.setattr(deploy, "submit", submit)

    def prepare(run):
        calls["steps"].append("prepare")
        assert run.source_topic == "orders" and run.target.key == "kafka_supplier_stats"
        return deploy.Prepared(
            (run.config.checkpoint_interval,), ("--x", "1"), ("--dlq-max-bytes", "99"), lambda: {"own": 7}
        )

    flink_job = deploy.FlinkDeployment(
        ToySpec("supplier-stats", None),  # type: ignore[arg-type]
        "kafka_supplier_stats",
        "toy-group",
        TopicSpec("toy-dlq", 1, 1000),
        ToyConfig,
        about="a toy; bad records",
        kinds=frozenset({"flink", "kafka"}),
        resources=frozenset({"kafka", "lineage", "flink"}),
        prepare=prepare,
    )
    asset = deploy.deploy_asset(Pipeline.from_settings(StackSettings()), PipelineTunables(), flink_job)
    return asset, calls


def test_the_factory_runs_the_jobs_steps_and_reports_the_shared_metadata(toy):
    asset, calls = toy
    emitter = Emitter()
    assert asset.required_resource_keys - {"io_manager"} == {"kafka", "lineage", "flink"}
    assert asset.descriptions_by_key[asset.key].endswith(
        "Materializing deploys the Flink job `supplier-stats` (a toy; bad records to topic toy-dlq)."
    )
    result = dg.materialize([asset], resources=toy_resources(emitter))
    assert result.success
    assert calls["steps"] == ["orders", "prepare"], "the source topic is checked before the job's own steps"
    args, version, savepoint = calls["submitted"]
    rule = ["--max-future-s", "3600", "--max-past-s", "604800"]
    assert args == ["--x", "1", *rule, "--dlq-max-bytes", "99", "--checkpoint-dir", "s3://chk"]
    assert version == "v<5 s|--max-future-s 3600 --max-past-s 604800 --dlq-max-bytes 99>" and savepoint is None
    meta = result.asset_materializations_for_node("kafka__supplier_stats")[0].metadata
    assert list(meta) == [
        "flink_job_id",
        "state",
        "flink_version",
        "started_by",
        "deployment",
        "openlineage/run_id",
        "lineage/observed",
        "own",
        "dead_letter_topic",
    ]
    assert (meta["flink_job_id"].value, meta["own"].value, meta["dead_letter_topic"].value) == ("j1", 7, "toy-dlq")
    assert meta["deployment"].value == "first start (no earlier state, no committed offsets)"
    assert meta["lineage/observed"].value.startswith("the declaration, standing in: the engine's account is unknown")
    assert emitter.events == [("supplier-stats", "START"), ("supplier-stats", "RUNNING")]


def test_a_refused_submit_sends_fail_and_fails_the_materialization(toy):
    asset, calls = toy
    calls["fail"] = True
    emitter = Emitter()
    result = dg.materialize([asset], resources=toy_resources(emitter), raise_on_error=False)
    assert not result.success
    assert emitter.events == [("supplier-stats", "FAIL", True)]
    failure = result.failure_data_for_node("kafka__supplier_stats")
    assert "deploying the Flink job supplier-stats failed: no slots" in failure.error.message


def test_the_listeners_start_goes_on_under_the_jobs_run_id_and_dagster_adds_running(monkeypatch):
    from lineage_assets.flink import deploy

    monkeypatch.setattr(
        deploy, "as_accounted", lambda event, builder, name, account: {**event, "accounted": (name, account)}
    )
    monkeypatch.setattr(deploy, "open_events", lambda *a, **kw: [("dagster", "START")])
    emitter, job = Emitter(), FlinkJob("j1", "supplier-stats", "RUNNING", 1_000)
    start = {"eventType": "START", "run": {"runId": "listener-id"}}
    sent_by = deploy.announce_with_listener(
        context(), "supplier-stats", [start], "the-account", job, "r1", "v1", "me", ToyBuilder(), emitter, None
    )
    assert sent_by == "OpenLineage Flink listener"
    assert emitter.events == [
        {"eventType": "START", "run": {"runId": "r1"}, "accounted": ("supplier-stats", "the-account")},
        ("supplier-stats", "RUNNING", False),
    ]

    ctx, emitter = context(), Emitter()
    sent_by = deploy.announce_with_listener(
        ctx, "supplier-stats", [], "the-account", job, "r1", "v1", "me", ToyBuilder(), emitter, None
    )
    assert sent_by == "Dagster (no listener event)" and emitter.events == [("dagster", "START")]
    assert ctx.log.lines[0][0] == "warning" and "sent no START for j1" in ctx.log.lines[0][1]


class Cluster:
    """A cluster that lists the jobs given and takes one more submission as ``jid``."""

    def __init__(self, listed: list[FlinkJob], jid: str, start_ms: int, name: str = "supplier-stats"):
        self.listed, self.jid, self.start_ms, self.name, self.cancelled = listed, jid, start_ms, name, []

    def submit_python(self, *args, **kwargs):
        return self.jid

    def job(self, jid):
        return FlinkJob(jid, self.name, "CREATED", self.start_ms)

    def named(self, name):
        return [j for j in [*self.listed, self.job(self.jid)] if j.name == name]

    def cancel(self, jid):
        self.cancelled.append(jid)


def test_a_job_started_meanwhile_by_another_deployer_wins_and_this_ones_is_cancelled():
    from lineage_assets.flink.deploy import FlinkError, submit

    cluster = Cluster([FlinkJob("j1", "supplier-stats", "RUNNING", 1_000)], "j2", 2_000)
    with pytest.raises(FlinkError, match="started meanwhile by another deployer as Flink job j1"):
        submit(cluster, FlinkJobSpec("supplier-stats", Path("job.py")), [], "v1", None)  # type: ignore[arg-type]
    assert cluster.cancelled == ["j2"]


def test_a_job_that_started_first_or_beside_finished_ones_is_kept():
    from lineage_assets.flink.deploy import submit

    finished = FlinkJob("j0", "supplier-stats", "CANCELED", 500)
    cluster = Cluster([finished, FlinkJob("j3", "supplier-stats", "CREATED", 3_000)], "j2", 2_000)
    job = submit(cluster, FlinkJobSpec("supplier-stats", Path("job.py")), [], "v1", None)  # type: ignore[arg-type]
    assert (job.jid, cluster.cancelled) == ("j2", [])


def test_a_job_the_deployment_named_itself_is_compared_with_jobs_of_that_name_only():
    from lineage_assets.flink.deploy import submit

    the_pipelines = FlinkJob("j1", "iceberg-ingestion", "RUNNING", 1_000)
    cluster = Cluster([the_pipelines], "j2", 2_000, name="iceberg-ingestion-copy")  # --job-name of a second copy
    job = submit(cluster, FlinkJobSpec("iceberg-ingestion", Path("job.py")), [], "v1", None)  # type: ignore[arg-type]
    assert (job.jid, cluster.cancelled) == ("j2", [])
