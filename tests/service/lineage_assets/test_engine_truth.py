"""The engines are the truth: whoever starts a Flink job or re-creates a connector, the stack's Dagster and Marquez
follow what runs, within a couple of sensor ticks; check (d) asks the engine when it runs.

Every outside action here goes through the engines' own interfaces (Flink's REST API and CLI, Connect's REST API,
a second Dagster instance with a lineage outbox that is never delivered), and every judgement reads the stores
directly: Marquez's REST API with plain HTTP, the stack's Dagster instance. The tests of this module run in order
and leave the pipeline running as they found it.
"""

from __future__ import annotations

import time

import dagster as dg
import pytest
import requests

from lineage_assets.checks.asset_checks import build_lineage_checks
from lineage_assets.flink import supplier_stats_stream_asset
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.resources import build_resources
from lineage_assets.tunables import PipelineTunables
from tests.service.lineage_assets.conftest import private_lineage, stack_dagster_instance
from tests.support.engine_waits import DEADLINE, wait_for, wait_for_delivery, wait_for_tick
from tests.support.marquez_runs import marquez_runs, one_open_run_with, running_runs
from tests.support.outside_flink import cancel, flink, restart_with_flink_cli, running_jid
from tests.support.stack_dagster import start_sensor, stop_sensor

pytestmark = pytest.mark.service

FLINK_JOB = "supplier-stats"
CONNECTOR = "orders-s3-sink"


def stack_observation(settings, key: dg.AssetKey) -> dict[str, object]:
    """The metadata of the stack's newest observation of ``key`` (what its asset page shows)."""
    with stack_dagster_instance(settings) as instance:
        records = instance.fetch_observations(key, limit=1).records
    if not records or records[0].asset_observation is None:
        return {}
    return {k: v.value for k, v in records[0].asset_observation.metadata.items()}


def reports_running(settings, key: dg.AssetKey, jid: str) -> dict[str, object] | None:
    """The stack's newest observation of ``key`` when it reports Flink job ``jid`` RUNNING (the state a job moves
    on to from INITIALIZING; a test waits for it rather than asserting on the first report of the job)."""
    observed = stack_observation(settings, key)
    return observed if observed.get("flink_job_id") == jid and observed.get("state") == "RUNNING" else None


@pytest.fixture(scope="module")
def stats_key(settings):
    return asset_key(Pipeline.from_settings(settings).dataset("kafka_supplier_stats"))


@pytest.fixture(scope="module")
def deployed(settings, pipeline_ran):
    """The main job ran: both Flink jobs and both connectors run under the stack's Dagster."""
    assert running_jid(settings, FLINK_JOB), "the main job deploys supplier-stats"
    return True


def test_a_job_restarted_by_a_second_dagster_instance_has_one_open_run_in_the_stack(
    settings, deployed, stats_key, tmp_path
):
    before = running_jid(settings, FLINK_JOB)
    cancel(settings, before)
    # a second Dagster instance, its own DAGSTER_HOME, its lineage into an outbox nobody delivers
    resources = {**build_resources(settings), "lineage": private_lineage(settings, tmp_path)}
    asset = supplier_stats_stream_asset.build_supplier_stats_stream_asset(
        Pipeline.from_settings(settings), PipelineTunables.from_settings(settings)
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home")) as other:
        result = dg.materialize([asset], resources=resources, instance=other)
    assert result.success
    after = running_jid(settings, FLINK_JOB)
    assert after and after != before
    meta = result.asset_materializations_for_node("kafka__supplier_stats")[0].metadata
    assert "retained checkpoint" in meta["deployment"].value, "a cancelled job's state is where it starts from"

    wait_for(
        f"one RUNNING run of {FLINK_JOB} in the stack's Marquez, for Flink job {after}",
        lambda: one_open_run_with(settings, FLINK_JOB, "flink_deployment", "jobId", after),
    )
    # a job goes INITIALIZING -> RUNNING after its submission: the sensor may report it first while initializing
    observed = wait_for(
        "the stack's Dagster reporting the new job RUNNING",
        lambda: reports_running(settings, stats_key, after),
    )
    assert str(observed["started_by"]).startswith("found running"), "started outside the stack's instance"
    cancelled = [r for r in marquez_runs(settings, FLINK_JOB) if r["state"] == "ABORTED"]
    assert any((r.get("facets") or {}).get("flink_deployment", {}).get("jobId") == before for r in cancelled), (
        "the cancelled job's run was closed"
    )


def test_a_third_instance_adopts_the_running_job_instead_of_starting_another(settings, deployed, tmp_path):
    running = running_jid(settings, FLINK_JOB)
    resources = {**build_resources(settings), "lineage": private_lineage(settings, tmp_path)}
    asset = supplier_stats_stream_asset.build_supplier_stats_stream_asset(
        Pipeline.from_settings(settings), PipelineTunables.from_settings(settings)
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home")) as third:
        result = dg.materialize([asset], resources=resources, instance=third)
    meta = result.asset_materializations_for_node("kafka__supplier_stats")[0].metadata
    assert meta["flink_job_id"].value == running and meta["deployment"].value.startswith("unchanged")
    assert meta["started_by"].value.startswith("found running"), "it says the job was started elsewhere"
    jobs = flink(settings, "GET", "/jobs/overview")["jobs"]
    assert [j["jid"] for j in jobs if j["name"] == FLINK_JOB and j["state"] == "RUNNING"] == [running]


def test_a_savepoint_restored_with_the_flink_cli_outside_dagster_has_one_open_run(settings, deployed, stats_key):
    before = running_jid(settings, FLINK_JOB)
    trigger = flink(settings, "POST", f"/jobs/{before}/stop", json={"drain": False})["request-id"]

    def savepoint():
        status = flink(settings, "GET", f"/jobs/{before}/savepoints/{trigger}")
        return status["operation"]["location"] if status["status"]["id"] == "COMPLETED" else None

    after = restart_with_flink_cli(settings, before, wait_for("the savepoint", savepoint))

    wait_for(
        f"one RUNNING run of {FLINK_JOB} in the stack's Marquez, for Flink job {after}",
        lambda: one_open_run_with(settings, FLINK_JOB, "flink_deployment", "jobId", after),
    )
    wait_for(
        "the stack's Dagster reporting the restored job RUNNING", lambda: reports_running(settings, stats_key, after)
    )
    stopped = [r for r in marquez_runs(settings, FLINK_JOB) if r["state"] == "COMPLETED"]
    assert any((r.get("facets") or {}).get("flink_deployment", {}).get("jobId") == before for r in stopped), (
        "the job stopped with a savepoint FINISHED: its run COMPLETED"
    )


def test_a_connector_deleted_and_created_again_has_one_new_open_run(settings, deployed):
    connect = settings.connect_url
    config = requests.get(f"{connect}/connectors/{CONNECTOR}/config", timeout=10).json()
    wait_for(f"an open run of {CONNECTOR}", lambda: running_runs(settings, CONNECTOR))
    (old,) = running_runs(settings, CONNECTOR)
    assert requests.delete(f"{connect}/connectors/{CONNECTOR}", timeout=30).status_code in (200, 204)
    created = requests.post(f"{connect}/connectors", json={"name": CONNECTOR, "config": config}, timeout=30)
    assert created.status_code == 201, created.text
    wait_for(
        f"{CONNECTOR} RUNNING again",
        lambda: (
            requests.get(f"{connect}/connectors/{CONNECTOR}/status", timeout=10)
            .json()
            .get("connector", {})
            .get("state")
            == "RUNNING"
        ),
    )

    def new_run():
        runs = running_runs(settings, CONNECTOR)
        return runs[0] if len(runs) == 1 and runs[0]["id"] != old["id"] else None

    run = wait_for(f"one new RUNNING run of {CONNECTOR} in the stack's Marquez", new_run)
    facet = run["facets"]["kafka_connector"]
    assert facet["name"] == CONNECTOR and facet["tasks"] and facet["tasks"][0]["state"] == "RUNNING"
    assert facet["incarnation"] != (old.get("facets") or {}).get("kafka_connector", {}).get("incarnation")
    assert next(r for r in marquez_runs(settings, CONNECTOR) if r["id"] == old["id"])["state"] == "ABORTED"


def run_state_check(settings) -> dg.AssetCheckEvaluation:
    """Check (d) of kafka/supplier_stats against the stack's Marquez, run the way the UI runs it."""
    pipeline = Pipeline.from_settings(settings)
    key = asset_key(pipeline.dataset("kafka_supplier_stats"))
    checks = [c for c in build_lineage_checks(pipeline) if any(k.asset_key == key for k in c.check_keys)]
    asset = supplier_stats_stream_asset.build_supplier_stats_stream_asset(
        pipeline, PipelineTunables.from_settings(settings)
    )
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [asset, *checks],
            selection=dg.AssetSelection.checks(dg.AssetCheckKey(key, "lineage_run_state_agrees")),
            resources=build_resources(settings),
            instance=instance,
        )
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_check_d_fails_while_the_lineage_is_stale_and_passes_once_the_sensor_ran(settings, deployed):
    assert run_state_check(settings).passed, "the pipeline as the earlier tests left it"
    stop_sensor(settings, "flink_job_sensor")
    try:
        before = running_jid(settings, FLINK_JOB)
        cancel(settings, before)
        checkpoint = flink(settings, "GET", f"/jobs/{before}/checkpoints")["latest"]["completed"]["external_path"]
        restart_with_flink_cli(settings, before, checkpoint)
        stale = run_state_check(settings)
        assert not stale.passed, "the engine runs a job whose run Marquez does not have open"
        assert "stale lineage, job running" in (stale.description or ""), stale.description
    finally:
        started = time.time()
        start_sensor(settings, "flink_job_sensor")
    # the sensor's next tick opens the run of the restarted job; once the drainer delivered what it queued, check (d)
    # is evaluated once
    tick = wait_for_tick(settings, "flink_job_sensor", after=started, timeout=DEADLINE)
    wait_for_delivery(settings, tick["endTimestamp"])
    evaluation = run_state_check(settings)
    assert evaluation.passed, evaluation.description
    assert "lineage RUNNING" in evaluation.description
