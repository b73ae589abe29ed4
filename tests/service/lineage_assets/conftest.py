"""Fixtures of the pipeline's service tests."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from urllib.parse import quote

import dagster as dg
import pyarrow as pa
import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table

from infra.services.dagster import DagsterDev
from infra.settings import REPO_ROOT
from lineage_assets.connect.assets import ORDERS_TOPIC
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.lineage.outbox import Drainer, Outbox
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.main_job import BATCH_SENSOR
from lineage_assets.metadata import asset_key
from lineage_assets.resources import build_resources
from lineage_assets.spark.new_orders_sensor import SUPPLIER_STATS_DAYS_JOB, owed_days
from tests.support.engine_waits import recent_ticks, wait_for, wait_for_delivery
from tests.support.outside_flink import running_jid
from tests.support.pipeline_jobs import JOBS, deploy, missing

#: the columns of Iceberg orders as Arrow, for tests that write orders into the table directly with pyiceberg
ORDERS_ARROW = pa.schema(
    [
        ("order_id", pa.string()),
        ("item", pa.string()),
        ("price", pa.decimal128(10, 2)),
        ("supplier", pa.string()),
        ("bid_time", pa.timestamp("us")),
    ]
)


def commit_retrying(table: Table, change: Callable[[Table], object], attempts: int = 5) -> None:
    """Apply a pyiceberg write (append, delete) to a table that iceberg-ingestion also commits to every checkpoint.

    Iceberg commits are optimistic: ours fails with a 409 when the job committed since the table was loaded. A 409
    means nothing of ours was committed, so the write is redone on the refreshed table, as Iceberg's own writers do.
    """
    for attempt in range(1, attempts + 1):
        try:
            change(table)
            return
        except CommitFailedException:
            if attempt == attempts:
                raise
            table.refresh()


#: OpenLineage job namespace of tests that make the pipeline's jobs fail or stop on purpose: their runs go to
#: Marquez beside the pipeline's jobs, never on top of them
TEST_JOB_NAMESPACE = "lineage-lab-tests"


@pytest.fixture(scope="module")
def pipeline(settings) -> Pipeline:
    """The pipeline's identities on the running stack (a module may override it, e.g. with pipeline_for_tests)."""
    return Pipeline.from_settings(settings)


def pipeline_for_tests(settings) -> Pipeline:
    """The pipeline's identities with its jobs in TEST_JOB_NAMESPACE (datasets unchanged)."""
    return Pipeline.from_settings(dataclasses.replace(settings, openlineage_namespace=TEST_JOB_NAMESPACE))


@pytest.fixture(scope="module")
def forget_test_jobs(settings):
    """After a module that runs jobs in TEST_JOB_NAMESPACE (it asks for this fixture: ``pytestmark``), those jobs are
    deleted (hidden) in Marquez, so the shared Marquez shows the pipeline's own graph again (its UI would draw a
    test's failed sink beside the real one). Only such modules: a module in another pytest process beside them
    (scripts/test.sh's side groups) would otherwise delete their jobs while their tests read them."""
    yield
    api = f"{settings.marquez_url}/api/v1/namespaces/{quote(TEST_JOB_NAMESPACE, safe='')}/jobs"
    for job in MarquezClient(settings.marquez_url).jobs(TEST_JOB_NAMESPACE):
        requests.delete(f"{api}/{quote(job['name'], safe='')}", timeout=10)


@pytest.fixture(scope="session")
def pipeline_ran(settings) -> str:
    """The main job run once per test session (by the first test that needs the whole pipeline in the stack and
    its lineage in Marquez), as `lineage-lab pipeline run` (a process of its own, this session's environment);
    what it printed, stdout and stderr interleaved."""
    ran = subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "pipeline", "run", "--orders", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO_ROOT,
    )
    assert ran.returncode == 0, ran.stdout
    return ran.stdout


@pytest.fixture(scope="module")
def flink_jobs_run(settings, pipeline_ran, request) -> dict[str, str]:
    """Both Flink jobs of the pipeline run on the stack's cluster when the module starts: job name -> Flink job id.
    An earlier module may have left one cancelled on purpose (test_flink_pipeline, test_iceberg_ingestion, ...), so a
    missing job is deployed here through the stack's own Dagster instance and resources, from its newest savepoint
    or retained checkpoint: the stack's sensors track it as the main job's, and the module runs in any order."""
    if missing(settings):
        from lineage_assets.definitions import build_definitions

        with stack_dagster_instance(settings) as instance:
            step = f"{request.module.__name__.rsplit('.', 1)[-1]} needs the Flink jobs"
            deploy(settings, build_definitions(settings).resources, instance, {}, step)
    return {
        name: wait_for(f"{name} RUNNING on the stack's cluster", lambda name=name: running_jid(settings, name))
        for name in JOBS
    }


def wait_until_quiet(read: Callable[[], object], what: str, quiet: float = 15.0, timeout: float = 180.0) -> None:
    """Wait until ``read()`` has not changed for ``quiet`` seconds (longer than a Flink checkpoint): a job deployed
    just now first works through its topic's backlog, which may hold records of earlier tests."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(1)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    pytest.fail(f"{what} kept changing for {timeout:.0f} s (last: {last})")


def read_topic(settings, topic: str, want, done=None, timeout: float = 180.0) -> list:
    """Committed records of ``topic`` (from the start) that ``want`` maps to a value, until ``done(found)``; without
    ``done``, every one up to the topic's end when the read began (duplicates kept)."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"t-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    found: list = []
    deadline = time.monotonic() + timeout
    try:
        if done is None:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
            remaining = [TopicPartition(topic, p, low) for p, (low, high) in ends.items() if high > low]
            consumer.assign(remaining)

            def finished(_found) -> bool:  # positions pass transaction markers too, which are never delivered
                remaining[:] = [tp for tp in consumer.position(remaining) if tp.offset < ends[tp.partition][1]]
                return not remaining
        else:
            consumer.subscribe([topic])
            finished = done
        while time.monotonic() < deadline and not finished(found):
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                item = want(msg)
                if item is not None:
                    found.append(item)
    finally:
        consumer.close()
    return found


def after_everything_in_orders(settings) -> dt.datetime:
    """A window start later than every plausible bid_time already in `orders` (earlier runs' data included), so the
    job's watermark never makes this run's orders late (an implausible one never reached the watermark). On a quiet
    stream supplier-stats' clock runs on with processing time until the partitions go idle (60 s), so it may be up
    to that far past the newest bid_time."""
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}))
    ctx = SerializationContext("orders", MessageField.VALUE)
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": f"t-{uuid.uuid4()}"})
    latest = dt.datetime.now(dt.UTC)
    plausible = latest + dt.timedelta(seconds=settings.order_max_future_s)
    try:
        for partition in range(ORDERS_TOPIC.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition("orders", partition), timeout=10)
            consumer.assign([TopicPartition("orders", partition, max(low, high - 500))])
            for msg in consumer.consume(500, timeout=5) if high > low else []:
                try:
                    bid = deserialize(msg.value(), ctx)["bid_time"]
                except Exception:  # poison records of earlier runs
                    continue
                latest = max(latest, bid) if bid <= plausible else latest
    finally:
        consumer.close()
    start = latest + dt.timedelta(seconds=30 + 60)
    return start.replace(second=start.second // 5 * 5, microsecond=0)


def upstream_columns(marquez, node_id: str, column: str) -> set[tuple[str, str, str]]:
    """Every (namespace, dataset, field) the column derives from, through Marquez's column-lineage API."""
    fields = {}
    for node in marquez.column_lineage(node_id, depth=20):
        data = node.get("data") or {}
        fields[(data.get("namespace"), data.get("dataset"), data.get("field"))] = [
            (f["namespace"], f["dataset"], f["field"]) for f in data.get("inputFields") or []
        ]
    start = next(k for k in fields if k[2] == column and node_id.endswith(f":{k[1]}"))
    found, todo = set(), [start]
    while todo:
        for source in fields.get(todo.pop(), []):
            if source not in found:
                found.add(source)
                todo.append(source)
    return found


def deliver(lineage: LineageResource, timeout: float = 60) -> None:
    """Send what a private outbox holds to Marquez now (the stack's drainer serves only the stack's outbox)."""
    drainer = Drainer(Outbox(lineage.outbox_path), lineage.backend_url)
    try:
        assert drainer.flush(timeout), f"events still queued for {lineage.backend_url} after {timeout}s"
    finally:
        drainer.stop()


def private_lineage(settings, directory) -> LineageResource:
    """A lineage resource with its own outbox, so a test reads exactly the events it caused."""
    return LineageResource(outbox_path=str(directory / "outbox.sqlite"), backend_url=settings.marquez_url)


@pytest.fixture(scope="module")
def resources(settings, tmp_path_factory):
    """The deployment's resources, but with a private lineage outbox for the test module."""
    return {**build_resources(settings), "lineage": private_lineage(settings, tmp_path_factory.mktemp("lineage"))}


def outbox_events(lineage: LineageResource) -> list[dict]:
    """Every event the resource's outbox holds, in the order they were emitted."""
    with sqlite3.connect(lineage.outbox_path) as db:
        return [json.loads(p) for (p,) in db.execute("SELECT payload FROM events ORDER BY seq")]


def evaluate_sensor(sensor, instance, resources, cursor: str | None):
    """One tick of ``sensor``; returns its SensorResult (fails the test on a skip)."""
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as ctx:
        result = sensor(ctx)
    assert isinstance(result, dg.SensorResult), result
    return result


def stack_dagster_instance(settings) -> dg.DagsterInstance:
    """The stack's own Dagster instance (use it as a context manager): the one whose daemon runs the sensors,
    schedules, backfills and freshness evaluation."""
    return dg.DagsterInstance.from_config(str(DagsterDev(settings).dagster_home))


#: the tag Dagster gives a partitioned run
PARTITION_TAG = "dagster/partition"
#: Dagster run states of a run not yet ended
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def wait_for_batch_side(settings, timeout: float = 420.0) -> None:
    """Wait until the stack's Dagster has no run of ``supplier_stats`` in progress (the new-orders sensor asks for
    one whenever an earlier test's orders reach Iceberg) and no day is owed a run (its freshness budget), then until
    the outbox has delivered every event queued by then: a Spark run opens the ``dagster`` run in Marquez when it
    starts and sends Spark's lineage when it ends, so in between Marquez shows that run RUNNING. Read from Dagster's
    run storage, the instance's record of the owed days and the outbox. The deadline is a failure detector, under
    the test's own time limit so that the failure says what was still in flight."""
    key = asset_key(Pipeline.from_settings(settings).dataset("iceberg_supplier_stats"))
    deadline = time.monotonic() + timeout
    with stack_dagster_instance(settings) as instance:
        while True:
            running = [
                r.dagster_run
                for r in instance.get_run_records(filters=dg.RunsFilter(statuses=IN_PROGRESS), limit=50)
                if r.dagster_run.job_name == SUPPLIER_STATS_DAYS_JOB or key in (r.dagster_run.asset_selection or ())
            ]
            owed = owed_days(instance, BATCH_SENSOR)
            if not running and not owed:
                break
            if time.monotonic() > deadline:
                runs = [f"{r.run_id[:8]} {r.job_name} {r.status.value} {r.tags.get(PARTITION_TAG)}" for r in running]
                pytest.fail(
                    f"after {timeout:.0f} s, supplier_stats runs still in progress: {runs or 'none'}; days owed a run "
                    f"(day: newest snapshot): {owed or 'none'}\n{recent_ticks(settings, BATCH_SENSOR)}"
                )
            time.sleep(1)
    wait_for_delivery(settings, time.time())


@pytest.fixture(scope="module")
def stack_instance(settings):
    with stack_dagster_instance(settings) as instance:
        yield instance


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright, for the UI tests (both installed by scripts/bootstrap.sh)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is not installed in the venv: run scripts/bootstrap.sh", pytrace=False)
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.fail("Debian's chromium is not installed: run scripts/bootstrap.sh (as root)", pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield browser
        browser.close()
