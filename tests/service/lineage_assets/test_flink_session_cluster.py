"""Both Flink jobs on any session cluster, by its REST URL (issue 15): a second Flink cluster from the PyFlink wheel
on other ports (tests/support/flink_cluster.py), whose lib/ has no connector, gets both jobs moved to it from the
stack's cluster (stopped there with savepoints, deployed by the assets with ``restore_from``, their connector jars
uploaded with each submission); orders produced before, during and after the move reach Iceberg exactly once and
their windows supplier-stats exactly; the Flink job sensor built for that cluster tracks both jobs there. Then both move
back to the stack's cluster the same way (also when a test fails), so later tests find the stack as it was.

The tests of this module run in order and share the moved jobs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import time
from dataclasses import dataclass, field

import dagster as dg
import pytest
import requests

from infra.services.flink import job_jars
from infra.settings import StackSettings
from lineage_assets.flink import iceberg_ingestion_asset, supplier_stats_stream_asset
from lineage_assets.flink.client import FlinkClient
from lineage_assets.flink.sensor import build_flink_job_sensor
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources
from tests.service.lineage_assets.conftest import (
    after_everything_in_orders,
    evaluate_sensor,
    private_lineage,
    stack_dagster_instance,
)
from tests.support.flink_cluster import FlinkSessionCluster
from tests.support.order_stream import (
    Orders,
    assert_windows_equal,
    expected_windows,
    iceberg_rows,
    stats_in,
)
from tests.support.pipeline_jobs import JOBS, deploy, job_ids

REST_PORT, RPC_PORT = 8095, 6133
STEP_MS = 20  # 250 orders per 5 s window


def stop_all(client: FlinkClient) -> dict[str, str]:
    """Stop both jobs where they run with a savepoint each; job name -> savepoint path."""
    savepoints = {}
    for name in JOBS:
        job = client.active(name)
        if job is not None:
            savepoints[name] = client.stop_with_savepoint(job.jid)
    return savepoints


@dataclass
class Move:
    """What the module's tests share: the two clusters' settings and clients, the jobs on the second cluster, and
    the orders produced around the move."""

    home: StackSettings  # the stack's
    away: StackSettings  # the same, with external_flink = the second cluster
    cluster: FlinkSessionCluster
    resources_away: dict
    instance_away: dg.DagsterInstance
    deployed: dict[str, dict] = field(default_factory=dict)  # on the second cluster: job name -> metadata
    to_away: dict[str, str] = field(default_factory=dict)  # savepoints taken on the stack's cluster
    to_home: dict[str, str] = field(default_factory=dict)  # savepoints taken on the second cluster
    producer: Orders | None = None
    orders: dict[str, dict] = field(default_factory=dict)
    start: dt.datetime | None = None
    back: bool = False
    running_before: set[str] = field(default_factory=set)  # jobs that ran on the stack's cluster before the module


def leave_as_found(move: Move) -> None:
    """Cancel, on the stack's cluster, the jobs this module had to deploy there first (the tests after it find
    the cluster as the tests before it left it, e.g. without jobs after test_flink_pipeline cancelled them)."""
    home = FlinkClient(move.home)
    for name in set(JOBS) - move.running_before:
        job = home.active(name)
        if job is None:
            continue
        home.cancel(job.jid)
        deadline = time.monotonic() + 60
        while home.job(job.jid).state != "CANCELED" and time.monotonic() < deadline:
            time.sleep(1)


def move_back(move: Move) -> dict[str, str]:
    """Both jobs from the second cluster back to the stack's, from savepoints, deployed through the stack's own
    Dagster instance and resources so that its sensor tracks them as before; idempotent (a retry continues)."""
    move.to_home.update(stop_all(FlinkClient(move.away)))
    jids = {}
    if any(FlinkClient(move.home).active(name) is None for name in JOBS):
        from lineage_assets.definitions import build_definitions

        # a job that never started on the second cluster resumes from the savepoint it left the stack's with
        with stack_dagster_instance(move.home) as instance:
            jids = job_ids(
                deploy(
                    move.home,
                    build_definitions(move.home).resources,
                    instance,
                    {**move.to_away, **move.to_home},
                    f"test_flink_session_cluster deploy to {move.home.flink_rest_url}",
                )
            )
    move.back = True
    return jids


@pytest.fixture(scope="module")
def cluster(settings):
    with FlinkSessionCluster(
        settings, settings.home / "flink-second", host=settings.host, rest_port=REST_PORT, rpc_port=RPC_PORT
    ) as running:
        yield running


@pytest.fixture(scope="module")
def moved(settings, cluster, tmp_path_factory, pipeline_ran):
    """Both jobs moved to the second cluster, with orders before, during and after the move. After the main job
    (``pipeline_ran``): the topics, the tables and the stack's jobs are what the module moves, so it runs alone too."""
    away = dataclasses.replace(settings, external_flink=cluster.rest_url)
    with dg.DagsterInstance.ephemeral() as instance_away:
        move = Move(
            home=settings,
            away=away,
            cluster=cluster,
            resources_away={
                **build_resources(away),
                "lineage": private_lineage(away, tmp_path_factory.mktemp("lineage-away")),
            },
            instance_away=instance_away,
        )
        home = FlinkClient(settings)
        move.running_before = {name for name in JOBS if home.active(name) is not None}
        try:
            if any(home.active(name) is None for name in JOBS):  # the stack as the main job leaves it
                from lineage_assets.definitions import build_definitions

                with stack_dagster_instance(settings) as instance:
                    deploy(settings, build_definitions(settings).resources, instance, {}, "test_flink_session_cluster")
            move.producer = Orders(settings)
            move.start = after_everything_in_orders(settings)
            rng = random.Random(15)
            # orders the stack's jobs are working on when they stop: in their savepoints (offsets, open windows)
            move.orders |= move.producer.produce(500, move.start, STEP_MS, rng)
            assert move.producer.producer.flush(60) == 0
            time.sleep(3)
            move.to_away = stop_all(home)
            assert set(move.to_away) == set(JOBS), move.to_away
            # orders while no job runs anywhere
            move.orders |= move.producer.produce(500, move.start + dt.timedelta(seconds=10), STEP_MS, rng)
            assert move.producer.producer.flush(60) == 0
            step = f"test_flink_session_cluster deploy to {away.flink_rest_url}"
            move.deployed = deploy(away, move.resources_away, instance_away, move.to_away, step)
            # orders once they run on the second cluster
            move.orders |= move.producer.produce(500, move.start + dt.timedelta(seconds=20), STEP_MS, rng)
            move.producer.flush_windows(move.start + dt.timedelta(seconds=60))
            yield move
        finally:
            if not move.back:
                try:
                    move_back(move)
                except Exception as exc:
                    pytest.fail(
                        "the Flink jobs could not be moved back to the stack's cluster: "
                        f"{exc}\nSavepoints taken on the second cluster: {move.to_home or 'none'}; taken on the "
                        f"stack's: {move.to_away or 'none'}. Redeploy each job that does not run on "
                        f"{settings.flink_rest_url} by materializing its asset (iceberg/default/orders, "
                        "kafka/supplier_stats) in the Dagster UI with run config "
                        "`ops: {<asset op>: {config: {restore_from: <savepoint>}}}`; without a savepoint, from "
                        f"the job's last retained checkpoint in {cluster.layout.data_dir / 'checkpoints'}.",
                        pytrace=False,
                    )
            leave_as_found(move)


def blob_sizes(cluster: FlinkSessionCluster, jid: str) -> list[int]:
    """Sizes of the files the second cluster's JobManager received for the job (its blob store)."""
    return sorted(p.stat().st_size for p in cluster.layout.data_dir.glob(f"tmp/jm_*/blobStorage/job_{jid}/*"))


def test_both_jobs_run_on_the_second_cluster_with_their_jars_uploaded(settings, moved):
    on_b = {j["jid"]: j for j in requests.get(f"{moved.cluster.rest_url}/jobs/overview", timeout=10).json()["jobs"]}
    jids = job_ids(moved.deployed)
    for name, jid in jids.items():
        assert on_b[jid]["name"] == name and on_b[jid]["state"] == "RUNNING", on_b[jid]
    home = FlinkClient(settings)
    assert [home.active(name) for name in JOBS] == [None, None], "nothing runs on the stack's cluster meanwhile"

    lib = [p.name for p in (moved.cluster.layout.home / "lib").iterdir()]
    assert not [n for n in lib if "kafka" in n or "iceberg" in n or "openlineage" in n], lib
    for name, jid in jids.items():
        received = blob_sizes(moved.cluster, jid)
        missing = [jar.name for jar in job_jars(settings) if jar.stat().st_size not in received]
        assert not missing, f"{name}: the connector jars {missing} were not uploaded with the job"

    away = FlinkClient(moved.away)
    deadline = time.monotonic() + 120
    checkpoints = {}
    while time.monotonic() < deadline and len(checkpoints) < len(JOBS):
        checkpoints = {name: away.last_checkpoint(jid) for name, jid in jids.items()}
        checkpoints = {name: c for name, c in checkpoints.items() if c}
        time.sleep(2)
    assert len(checkpoints) == len(JOBS), "both jobs checkpoint on the second cluster"
    for name, checkpoint in checkpoints.items():
        where = checkpoint["external_path"]
        assert where.startswith(f"file:{moved.cluster.layout.data_dir / 'checkpoints'}"), f"{name}: {where}"
    restored = {
        name: requests.get(f"{moved.cluster.rest_url}/jobs/{jid}/checkpoints", timeout=10).json()["latest"]["restored"]
        for name, jid in jids.items()
    }
    for name, savepoint in moved.to_away.items():
        assert restored[name]["is_savepoint"] and restored[name]["external_path"] == savepoint, restored[name]
    # the OpenLineage listener runs in the client that submits (its jar is in the client's lib/, not the cluster's)
    assert (
        moved.deployed[supplier_stats_stream_asset.JOB]["openlineage/start_sent_by"].value
        == "OpenLineage Flink listener"
    )


def test_orders_from_before_during_and_after_the_move_arrive_exactly_once(settings, moved):
    orders = moved.orders
    rows = iceberg_rows(moved.resources_away, f"ff-{moved.producer.token}", len(orders))
    assert set(rows) == set(orders), f"{len(rows)} of {len(orders)} orders in Iceberg"
    assert all(len(prices) == 1 for prices in rows.values()), "each order exactly once across the move"

    expected = expected_windows(orders)
    found = stats_in(settings, expected)
    assert_windows_equal(found, expected)  # windows open at the stop came back from the savepoint, none twice


def test_the_sensor_tracks_both_jobs_on_the_second_cluster(moved):
    pipeline = Pipeline.from_settings(moved.away)
    sensor = build_flink_job_sensor(pipeline, moved.away.streaming_fresh_minutes)
    resources = {k: moved.resources_away[k] for k in ("iceberg", "kafka", "lineage", "flink")}  # no Spark session
    result = evaluate_sensor(sensor, moved.instance_away, resources, None)
    observed = {
        o.asset_key.to_user_string(): o.metadata for o in result.asset_events if isinstance(o, dg.AssetObservation)
    }
    assert set(observed) == {"iceberg/default/orders", "kafka/supplier_stats"}
    for name, key in (
        (iceberg_ingestion_asset.JOB, "iceberg/default/orders"),
        (supplier_stats_stream_asset.JOB, "kafka/supplier_stats"),
    ):
        assert observed[key]["flink_job_id"].value == moved.deployed[name]["flink_job_id"].value
        assert observed[key]["state"].value == "RUNNING", observed[key]
        assert observed[key]["last_checkpoint"].value != "none", f"{name}: checkpoints on the second cluster"
    assert observed["iceberg/default/orders"]["dagster/row_count"].value >= len(moved.orders)
    assert observed["kafka/supplier_stats"]["output_records"].value > 0


def test_both_jobs_move_back_to_the_stack_losing_nothing(settings, moved):
    rng = random.Random(16)
    moved.to_home.update(stop_all(FlinkClient(moved.away)))
    assert set(moved.to_home) == set(JOBS), moved.to_home
    # orders while no job runs anywhere, picked up from the savepoints on the stack's cluster
    later = moved.producer.produce(500, moved.start + dt.timedelta(seconds=70), STEP_MS, rng)
    assert moved.producer.producer.flush(60) == 0
    jids = move_back(moved)

    home = FlinkClient(settings)
    assert {name: home.active(name).jid for name in JOBS} == jids, "both run on the stack's cluster again"
    assert not [j for j in FlinkClient(moved.away).jobs() if j.state == "RUNNING"], "none left on the second cluster"
    moved.producer.flush_windows(moved.start + dt.timedelta(seconds=120))
    rows = iceberg_rows(moved.resources_away, f"ff-{moved.producer.token}", len(moved.orders) + len(later))
    assert set(rows) == set(moved.orders) | set(later)
    assert all(len(prices) == 1 for prices in rows.values()), "each order exactly once after moving back"
    expected = expected_windows(later)
    assert_windows_equal(stats_in(settings, expected), expected)
