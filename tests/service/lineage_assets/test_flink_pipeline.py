"""Both Flink jobs for real, deployed from Dagster: 10,000 orders with known bid_times and 100 poison records in
`orders` give exactly the per-supplier 5 s windows the test computes itself and exactly those orders in Iceberg;
the poison is dead-lettered by both jobs; a killed TaskManager loses and duplicates nothing; the sensor ends both
OpenLineage runs when the cluster stops and when each job is cancelled.

The tests of this module run in order and share the deployed jobs.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import random
import signal
import time
import uuid
from decimal import Decimal

import dagster as dg
import pytest
import requests
from confluent_kafka import Producer

from infra import supervisor
from infra.services.base import read_pid
from infra.services.flink import FlinkJobManager, FlinkTaskManager
from lineage_assets.checks.asset_checks import build_lineage_checks
from lineage_assets.connect.assets import ORDERS_TOPIC
from lineage_assets.flink import iceberg_ingestion_asset, supplier_stats_stream_asset
from lineage_assets.flink.client import FlinkClient
from lineage_assets.flink.sensor import build_flink_job_sensor
from lineage_assets.kafka.topics import ensure_topic
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.metadata import asset_key
from lineage_assets.tunables import PipelineTunables
from tests.service.lineage_assets.conftest import (
    after_everything_in_orders,
    deliver,
    evaluate_sensor,
    outbox_events,
    pipeline_for_tests,
    read_topic,
)
from tests.support.engine_waits import wait_for_checkpoints
from tests.support.order_stream import (
    Orders,
    assert_windows_equal,
    counted,
    expected_windows,
    iceberg_rows,
    stats_in,
)

pytestmark = pytest.mark.usefixtures("forget_test_jobs")  # its jobs in TEST_JOB_NAMESPACE go after it

JOBS = (iceberg_ingestion_asset.JOB, supplier_stats_stream_asset.JOB)


@pytest.fixture(scope="module")
def instance():
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture(scope="module")
def pipeline(settings):
    """Jobs in the tests' namespace: these tests cancel and kill the pipeline's Flink jobs on purpose."""
    return pipeline_for_tests(settings)


def deploy_both(settings, resources, instance, pipeline) -> dict[str, dg.MaterializeResult]:
    assets = [
        iceberg_ingestion_asset.build_iceberg_ingestion_asset(pipeline, PipelineTunables.from_settings(settings)),
        supplier_stats_stream_asset.build_supplier_stats_stream_asset(
            pipeline, PipelineTunables.from_settings(settings)
        ),
    ]
    config = {
        "iceberg__default__orders": {"config": {"checkpoint_interval": "5 s"}},
        "kafka__supplier_stats": {"config": {"checkpoint_interval_ms": 5000}},
    }
    result = dg.materialize(assets, resources=resources, instance=instance, run_config={"ops": config})
    assert result.success
    return {
        iceberg_ingestion_asset.JOB: result.asset_materializations_for_node("iceberg__default__orders")[0].metadata,
        supplier_stats_stream_asset.JOB: result.asset_materializations_for_node("kafka__supplier_stats")[0].metadata,
    }


@pytest.fixture(scope="module")
def deployed(settings, resources, instance, pipeline):
    ensure_topic(settings.kafka_bootstrap, ORDERS_TOPIC)
    yield deploy_both(settings, resources, instance, pipeline)
    client = FlinkClient(settings)
    for name in JOBS:
        job = client.active(name)
        if job:
            client.cancel(job.jid)


def test_windows_and_iceberg_are_exact_and_poison_is_dead_lettered(settings, resources, deployed):
    orders_out = Orders(settings)
    rng = random.Random(7)
    start = after_everything_in_orders(settings)
    orders = orders_out.produce(5000, start, 10, rng)
    orders_out.produce_poison(100, start + dt.timedelta(seconds=50))
    orders |= orders_out.produce(5000, start + dt.timedelta(seconds=50), 10, rng)
    orders_out.flush_windows(start + dt.timedelta(seconds=130))
    assert len(orders) == 10_000

    expected = expected_windows(orders)
    found = stats_in(settings, expected)
    assert_windows_equal(found, expected)
    assert counted(found) == 10_000

    rows = iceberg_rows(resources, f"ff-{orders_out.token}", 10_000)
    assert set(rows) == set(orders), f"{len(rows)} of 10000 orders in Iceberg"
    assert all(len(prices) == 1 for prices in rows.values()), "each order exactly once"
    assert {k: v[0] for k, v in rows.items()} == {k: Decimal(o["price"]) for k, o in orders.items()}

    token = orders_out.token.encode()
    stats_dlq = read_topic(
        settings,
        supplier_stats_stream_asset.DLQ_TOPIC.name,
        lambda m: (
            json.loads(m.value())["reason"] if token in base64.b64decode(json.loads(m.value())["raw_value"]) else None
        ),
        lambda found: len(found) >= 100,
        timeout=60,
    )
    ingestion_dlq = read_topic(
        settings,
        iceberg_ingestion_asset.DLQ_TOPIC.name,
        lambda m: (
            json.loads(m.value())["reason"]
            if json.loads(m.value())["record_key"] == f"poison-{orders_out.token}"
            else None
        ),
        lambda found: len(found) >= 100,
        timeout=60,
    )
    for reasons in (stats_dlq, ingestion_dlq):
        assert len(reasons) == 100, "every poison record dead-lettered exactly once"
        assert sum(r.startswith("not Confluent wire format") for r in reasons) == 25
        assert sum(r.startswith("unknown schema id") for r in reasons) == 25
        assert sum(r.startswith("unparsable price 'abc'") for r in reasons) == 25
        assert sum(r.startswith("bid_time missing or null") for r in reasons) == 25
    client = FlinkClient(settings)
    assert [client.active(name).state for name in JOBS] == ["RUNNING", "RUNNING"], "poison never stops a job"


def dead_letter_reasons(settings, marker: str, want: int) -> dict[str, dict[bytes, str]]:
    """Job -> {raw value: reason} of the dead letters whose raw value contains ``marker``, from both jobs' topics."""
    needle = marker.encode()

    def letter(m):
        value = json.loads(m.value())
        raw = base64.b64decode(value["raw_value"])
        return (raw, value["reason"]) if needle in raw else None

    found = {}
    for job in (supplier_stats_stream_asset, iceberg_ingestion_asset):
        found[job.JOB] = dict(read_topic(settings, job.DLQ_TOPIC.name, letter, lambda f: len(f) >= want, timeout=120))
    return found


def restarts(settings, name: str) -> int:
    """Failures of the job's current run so far (each restart is one entry of its exception history)."""
    jid = FlinkClient(settings).active(name).jid
    history = requests.get(f"{settings.flink_rest_url}/jobs/{jid}/exceptions", timeout=10).json()["exceptionHistory"]
    return len(history["entries"])


def test_implausible_orders_are_dead_lettered_by_both_jobs_with_one_reason_and_the_clock_holds(
    settings, resources, deployed
):
    """Orders far in the future or past, and prices that do not fit, among normal ones: both jobs dead-letter each
    with the same reason, and the normal orders after them are still counted, window by window."""
    orders_out = Orders(settings)
    rng = random.Random(13)
    start = after_everything_in_orders(settings)
    orders = orders_out.produce(1000, start, 10, rng)
    hostile = {
        "far-future": ("12.00", dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC), "bid_time 9999-12-31T23:59:59Z"),
        "far-past": ("12.00", dt.datetime(2000, 1, 1, tzinfo=dt.UTC), "bid_time 2000-01-01T00:00:00Z"),
        "huge": ("1e309", start, "price 1E+309 does not fit DECIMAL(10,2)"),
        "fifteen-digits": ("123456789012345", start, "price 123456789012345 does not fit DECIMAL(10,2)"),
        "negative": ("-1.00", start, "price -1.00 is negative"),
        "third-decimal": ("12.345", start, "price 12.345 does not fit DECIMAL(10,2)"),
    }
    for kind, (price, bid, _) in hostile.items():
        order = {**orders_out.poison(price, bid, 0), "order_id": f"{kind}-{orders_out.token}"}
        order["supplier"] = orders_out.suppliers[0]  # counted in a window if it got through
        orders_out.producer.produce("orders", key=order["order_id"], value=orders_out.serialize(order, orders_out.ctx))
    orders |= orders_out.produce(1000, start + dt.timedelta(seconds=10), 10, rng)
    orders_out.flush_windows(start + dt.timedelta(seconds=40))

    expected = expected_windows(orders)
    found = stats_in(settings, expected)
    assert_windows_equal(found, expected)
    assert counted(found) == 2000, "orders after the far-future one are still counted"

    letters = dead_letter_reasons(settings, orders_out.token, len(hostile))
    for kind, (_, _, reason) in hostile.items():
        by_job = {
            job: next((r for raw, r in got.items() if f"{kind}-{orders_out.token}".encode() in raw), None)
            for job, got in letters.items()
        }
        assert set(by_job.values()) != {None}, f"{kind}: dead-lettered by neither job"
        assert len(set(by_job.values())) == 1, f"{kind}: the jobs give different reasons: {by_job}"
        assert next(iter(by_job.values())).startswith(reason), by_job
    rows = iceberg_rows(resources, f"ff-{orders_out.token}", 2000)
    assert len(rows) == 2000, f"{len(rows)} of 2000 normal orders in Iceberg"
    for kind in hostile:  # they came before the last normal orders, which are all in: none of them will come
        assert not iceberg_rows(resources, f"{kind}-{orders_out.token}", 0), f"{kind} reached Iceberg"


def test_a_dead_letter_larger_than_a_request_is_stored_whole_without_a_restart(settings, deployed):
    before = {name: restarts(settings, name) for name in JOBS}
    marker = f"oversized-{uuid.uuid4().hex}"
    junk = marker.encode() + random.Random(5).randbytes(1_000_000)  # not an order; base64 + JSON passes 1 MiB
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "message.max.bytes": 2_000_000})
    producer.produce("orders", key=marker, value=junk)
    assert producer.flush(60) == 0

    letters = dead_letter_reasons(settings, marker, 1)
    for job, got in letters.items():
        assert list(got) == [junk], f"{job}: the dead letter holds the record whole"
        assert next(iter(got.values())).startswith("not Confluent wire format"), got.values()
    client = FlinkClient(settings)
    assert [client.active(name).state for name in JOBS] == ["RUNNING", "RUNNING"]
    assert {name: restarts(settings, name) for name in JOBS} == before, "a dead letter never restarts a job"


def test_a_killed_taskmanager_loses_and_duplicates_nothing(settings, resources, deployed):
    orders_out = Orders(settings)
    start = after_everything_in_orders(settings)
    orders = orders_out.produce(4000, start, 10, random.Random(11))
    assert orders_out.producer.flush(60) == 0
    time.sleep(4)  # ingestion under way, checkpoints pending

    taskmanager = FlinkTaskManager(settings)
    pid = read_pid(taskmanager)
    assert pid is not None, "the stack's TaskManager is running"
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while read_pid(taskmanager) is not None and time.monotonic() < deadline:
        time.sleep(0.2)  # SIGKILL is delivered asynchronously: start the new one once the old one is gone
    supervisor.start(taskmanager, log=lambda _: None)
    assert read_pid(taskmanager) not in (None, pid), "a new TaskManager process runs"
    orders_out.flush_windows(start + dt.timedelta(seconds=70))

    rows = iceberg_rows(resources, f"ff-{orders_out.token}", 4000)
    assert set(rows) == set(orders), f"{len(rows)} of 4000 orders in Iceberg after the TaskManager was killed"
    assert all(len(prices) == 1 for prices in rows.values()), "each order exactly once after recovery"
    # supplier-stats after the replay: every window, exact, emitted once (transactions of the killed attempt were
    # aborted; windows restored from the checkpoint fire when the restored watermarks pass them)
    expected = expected_windows(orders)
    assert_windows_equal(stats_in(settings, expected, timeout=180), expected)
    # two more checkpoints of supplier-stats (its Kafka transactions commit on them): a window emitted twice would be
    # committed by then
    wait_for_checkpoints(settings, [supplier_stats_stream_asset.JOB])
    found = stats_in(settings, expected, to_end=True)
    assert_windows_equal(found, expected)
    assert counted(found) == 4000
    client = FlinkClient(settings)
    assert [client.active(name).state for name in JOBS] == ["RUNNING", "RUNNING"]


def test_lineage_of_both_jobs_names_the_one_orders_topic(settings, resources, deployed, pipeline):
    events = outbox_events(resources["lineage"])
    orders = pipeline.dataset("kafka_orders")
    for name, output_key in (
        (supplier_stats_stream_asset.JOB, "kafka_supplier_stats"),
        (iceberg_ingestion_asset.JOB, "iceberg_orders"),
    ):
        run_id = deployed[name]["openlineage/run_id"].value
        mine = [e for e in events if e["run"]["runId"] == run_id]
        assert [e["eventType"] for e in mine] == ["START", "RUNNING"], name
        running = mine[1]
        assert running["job"]["name"] == name
        assert running["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
        assert [(i["namespace"], i["name"]) for i in running["inputs"]] == [(orders.namespace, orders.name)]
        out, dead_letters = running["outputs"]
        assert dead_letters["name"] == pipeline.dataset(f"dlq_{name.replace('-', '_')}").name
        target = pipeline.dataset(output_key)
        assert (out["namespace"], out["name"]) == (target.namespace, target.name)
        assert [f["name"] for f in out["facets"]["schema"]["fields"]] == list(target.column_names)
        assert set(out["facets"]["columnLineage"]["fields"]) == set(target.column_names)
    start = next(
        e for e in events if e["run"]["runId"] == deployed[supplier_stats_stream_asset.JOB]["openlineage/run_id"].value
    )
    assert start["producer"].startswith("https://github.com/OpenLineage/OpenLineage"), "the Flink listener's START"
    assert deployed[supplier_stats_stream_asset.JOB]["openlineage/start_sent_by"].value == "OpenLineage Flink listener"


def test_the_sensor_ends_both_runs_when_the_cluster_stops(settings, resources, deployed, instance, pipeline):
    sensor = build_flink_job_sensor(pipeline, settings.streaming_fresh_minutes)
    first = evaluate_sensor(sensor, instance, resources, None)
    states = {
        o.asset_key.to_user_string(): o.metadata["state"].value
        for o in first.asset_events
        if isinstance(o, dg.AssetObservation)
    }
    assert states == {"iceberg/default/orders": "RUNNING", "kafka/supplier_stats": "RUNNING"}

    cluster = [FlinkJobManager(settings), FlinkTaskManager(settings)]
    supervisor.down(cluster, log=lambda _: None)
    try:
        second = evaluate_sensor(sensor, instance, resources, first.cursor)
    finally:
        supervisor.up(cluster, log=lambda _: None)
    evaluate_sensor(sensor, instance, resources, second.cursor)  # a later tick closes nothing twice

    events = outbox_events(resources["lineage"])
    for name in JOBS:
        run_id = deployed[name]["openlineage/run_id"].value
        assert [e["eventType"] for e in events if e["run"]["runId"] == run_id] == ["START", "RUNNING", "ABORT"], name
    deliver(resources["lineage"])
    marquez = MarquezClient(settings.marquez_url)
    for name in JOBS:
        assert marquez.run(deployed[name]["openlineage/run_id"].value)["state"] == "ABORTED", name


def run_state_check(settings, resources, instance, pipeline) -> dg.AssetCheckEvaluation:
    """Check (d) of iceberg/default/orders, run through Dagster like the UI runs it, on what Marquez holds."""
    deliver(resources["lineage"])
    ds = pipeline.dataset("iceberg_orders")
    checks = [c for c in build_lineage_checks(pipeline) if any(k.asset_key == asset_key(ds) for k in c.check_keys)]
    asset = iceberg_ingestion_asset.build_iceberg_ingestion_asset(pipeline, PipelineTunables.from_settings(settings))
    result = dg.materialize(
        [asset, *checks],
        selection=dg.AssetSelection.checks(dg.AssetCheckKey(asset_key(ds), "lineage_run_state_agrees")),
        resources=resources,
        instance=instance,
    )
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_the_sensor_ends_each_run_when_its_job_is_cancelled(settings, resources, instance, pipeline):
    redeployed = deploy_both(settings, resources, instance, pipeline)
    sensor = build_flink_job_sensor(pipeline, settings.streaming_fresh_minutes)
    first = evaluate_sensor(sensor, instance, resources, None)
    assert run_state_check(settings, resources, instance, pipeline).passed, "running job, open run"
    client = FlinkClient(settings)
    for name in JOBS:
        jid = redeployed[name]["flink_job_id"].value
        client.cancel(jid)
        deadline = time.monotonic() + 60
        while client.job(jid).state != "CANCELED" and time.monotonic() < deadline:
            time.sleep(1)
    stale = run_state_check(settings, resources, instance, pipeline)
    assert not stale.passed, "a cancelled job whose run is still RUNNING in the lineage graph fails check (d)"
    assert "CANCELED" in stale.description and "RUNNING" in stale.description
    evaluate_sensor(sensor, instance, resources, first.cursor)
    assert run_state_check(settings, resources, instance, pipeline).passed, "passes once the sensor closed the run"
    marquez = MarquezClient(settings.marquez_url)
    for name in JOBS:
        job = marquez.job(pipeline.job(name).namespace, name)
        assert job["latestRun"]["id"] == redeployed[name]["openlineage/run_id"].value, name
        assert job["latestRun"]["state"] == "ABORTED", f"{name}: one sensor tick after the cancel"
    events = outbox_events(resources["lineage"])
    for name in JOBS:
        run_id = redeployed[name]["openlineage/run_id"].value
        ends = [e for e in events if e["run"]["runId"] == run_id and e["eventType"] == "ABORT"]
        assert len(ends) == 1, name
        assert ends[0]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
