"""The streaming jobs' statistics as Marquez keeps them, judged against the stores by readers of the test's own.

Orders are inserted into the CDC source table (as the generator does) and, once through the jobs, the checks job is
run (as its schedule runs it) until it has told the open runs of iceberg-ingestion, orders-s3-sink and supplier-stats
about a period that moved rows. Marquez's run (one GET of
``/api/v1/jobs/runs/{id}``: the latest facets of each kind) carries the statistics of the latest such event and its
``conservation_period`` run facet names the two cuts the period lies between. The test then reads the stores
itself: the Iceberg snapshots between the two snapshot ids (pyiceberg summaries), the archive's objects between the
two object counts of each partition folder (a boto3 listing and a GET of each, counting lines) and the ``orders``
records between the two cuts' offsets (a read-committed consumer). The supplier-stats run must carry input and
output statistics too, its input judged the same way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time
from typing import Any
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.expressions import In

from infra.services.iceberg_catalog import load_catalog
from infra.settings import StackSettings
from lineage_assets.kafka.topics import end_offsets
from lineage_assets.resources import build_resources
from lineage_assets.source.orders import Order, ensure_table, insert_orders
from tests.service.lineage_assets.conservation.conftest import committed_past, judge_consumer, order_records
from tests.support.check_runs import run_the_checks_job
from tests.support.engine_waits import wait_for_delivery
from tests.support.order_stream import expected_windows
from tests.support.supplier_stats_job import Topic

pytestmark = pytest.mark.service

NAMESPACE = "lineage-lab"
#: the broker the stack's clients reach (scripts/test.sh runs some modules on a second stack, on other ports)
KAFKA = f"kafka://{StackSettings.from_env().kafka_bootstrap}"
ORDERS = (KAFKA, "orders")
ICEBERG_ORDERS = ("s3://warehouse", "default/orders")
ARCHIVE = ("s3://orders-archive", "topics/orders")
SUPPLIER_STATS = (KAFKA, "supplier-stats")
KEY = re.compile(r"topics/orders/partition=(\d+)/orders\+(\d+)\+(\d{20})\.jsonl")
#: orders inserted per batch; another batch follows while no check run has told a run about new rows
BATCH = 300
#: batches at most: the first tells iceberg-ingestion and the archive sink; a supplier-stats window fires only once
#: later orders pass it (or the quiet advance), so the second batch's check run tells supplier-stats at the latest
BATCHES = 3
#: a batch is in every output within a checkpoint or a sink flush (<= 60 s): a failure detector, not a pace
BATCH_THROUGH_S = 240.0
#: the quiet advance fires the batch's last window within window + out-of-orderness + quiet advance + a checkpoint
#: (about 30 s): waited for at most this long before the batch's check run, which then tells supplier-stats too
WINDOW_FIRED_S = 90.0


def qualified(dataset: tuple[str, str]) -> str:
    return f"{dataset[0]}/{dataset[1]}"


def latest_run(settings, job: str) -> dict | None:
    """The job's newest run in Marquez, read whole from ``/api/v1/jobs/runs/{id}`` (one query: its run facets and
    dataset facets are those of the same, latest, event)."""
    runs = requests.get(
        f"{settings.marquez_url}/api/v1/namespaces/{NAMESPACE}/jobs/{quote(job, safe='')}/runs",
        params={"limit": 1},
        timeout=10,
    ).json()["runs"]
    if not runs:
        return None
    return requests.get(f"{settings.marquez_url}/api/v1/jobs/runs/{runs[0]['id']}", timeout=10).json()


def dataset_facets(run: dict, kind: str, dataset: tuple[str, str]) -> dict[str, Any]:
    """The facets of ``dataset`` among the run's input or output versions (``kind``: "input"/"output") that carry
    statistics. A run can hold several versions of a dataset (an input's version moves when its producer reports it
    anew), and the API does not order them: then they are read from the run's latest stored event, the one whose
    ``conservation_period`` the run shows."""
    statistic = f"{kind}Statistics"
    versions = [
        v["facets"]
        for v in run[f"{kind}DatasetVersions"]
        if (v["datasetVersionId"]["namespace"], v["datasetVersionId"]["name"]) == dataset and statistic in v["facets"]
    ]
    assert versions, f"{dataset} in run {run['id']}: no {kind} version with statistics"
    if len(versions) == 1:
        return versions[0]
    end = run["facets"]["conservation_period"]["endTime"]
    events = requests.get(
        f"{StackSettings.from_env().marquez_url}/api/v1/events/lineage",
        params={"limit": 500, "sortDirection": "desc"},
        timeout=30,
    ).json()["events"]
    (event,) = [
        e
        for e in events
        if e["run"]["runId"] == run["id"] and e["run"]["facets"].get("conservation_period", {}).get("endTime") == end
    ]
    (found,) = [d for d in event[f"{kind}s"] if (d["namespace"], d["name"]) == dataset]
    return found[f"{kind}Facets"]


def told_after(settings, job: str, output: tuple[str, str], since: str) -> dict | None:
    """The job's open run once its latest statistics cover a period that ended after ``since`` (ISO) and in which
    ``output`` gained rows; None until then."""
    run = latest_run(settings, job)
    if run is None or run["state"] != "RUNNING":
        return None
    period = run.get("facets", {}).get("conservation_period")
    if not period or period["endTime"] <= since:
        return None
    out = dataset_facets(run, "output", output)["outputStatistics"]["rowCount"]
    return run if out > 0 else None


def batch_in_outputs(settings, ids: list[str], start: dict[int, int]) -> None:
    """Until the batch is through the three jobs: every order of it in Iceberg (a pyiceberg scan of its ids), and the
    archive sink's and supplier-stats' groups committed past the last record of ``orders`` read from ``start`` (the
    sink commits an offset once its object is written, supplier-stats on a checkpoint, which commits the windows it
    fired)."""
    table = load_catalog(settings).load_table("default.orders")
    deadline = time.monotonic() + BATCH_THROUGH_S
    while table.refresh().scan(row_filter=In("order_id", ids)).to_arrow().num_rows < len(ids):
        assert time.monotonic() < deadline, f"the batch did not reach Iceberg within {BATCH_THROUGH_S:.0f} s"
        time.sleep(1)
    _, after_last = order_records(settings, start)
    for group in ("connect-orders-s3-sink", "supplier-stats"):
        while behind := committed_past(settings, group, after_last):
            assert time.monotonic() < deadline, f"{group} behind the batch (partition: committed, wanted): {behind}"
            time.sleep(1)


def last_window_fired(settings, output: Topic, batch: list[Order]) -> None:
    """Until supplier-stats has committed the window of the batch's newest order, read from ``output`` (its topic
    from its end before the batch): windows fire in event-time order, so the batch's others fired with or before
    it, and the check run that follows sees the job's output grow (without this wait that often took a second batch:
    a window fires only once the stream passed it). Not a judge: past the deadline the batch loop goes on as before."""
    newest = max(batch, key=lambda o: o.bid_time)
    (wanted,) = expected_windows({newest.order_id: dataclasses.asdict(newest)})
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}))
    ctx = SerializationContext(SUPPLIER_STATS[1], MessageField.VALUE)

    def window(msg) -> tuple[str, str]:
        value = deserialize(msg.value(), ctx)
        return value["window_start"], value["supplier"]

    output.read(window, lambda found: wanted in found, time.monotonic() + WINDOW_FIRED_S)


@pytest.fixture(scope="module")
def told(settings, stack_instance) -> dict[str, dict]:
    """job -> its Marquez run after orders of this test went through it. A batch of orders is inserted into the
    source table and waited for in the outputs, then the checks job is run (as the schedule runs it), which tells
    every open run what its hop moved since the previous look; again, with another batch, until each job's latest
    statistics cover a period after the first batch in which it wrote (a window fires only once the stream passed
    it, so supplier-stats may need the second batch)."""
    wanted = {"iceberg-ingestion": ICEBERG_ORDERS, "orders-s3-sink": ARCHIVE, "supplier-stats": SUPPLIER_STATS}
    source_db = build_resources(settings)["source_db"]
    since = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    found: dict[str, dict] = {}
    for _ in range(BATCHES):
        start = end_offsets(settings.kafka_bootstrap, "orders")
        windows = Topic(settings, SUPPLIER_STATS[1])
        with source_db.connect() as conn:
            ensure_table(conn)
            inserted = insert_orders(conn, BATCH, 0)
        assert len(inserted) == BATCH
        batch_in_outputs(settings, [o.order_id for o in inserted], start)
        try:
            last_window_fired(settings, windows, inserted)
        finally:
            windows.close()
        run_the_checks_job(settings, stack_instance, requested_by=__name__)
        wait_for_delivery(settings, time.time())  # the run's events go to Marquez through the outbox
        for job, output in wanted.items():
            if job not in found and (run := told_after(settings, job, output, since)) is not None:
                found[job] = run
        if len(found) == len(wanted):
            return found
    pytest.fail(f"no statistics after {since} in Marquez for {set(wanted) - set(found)} after {BATCHES} batches")


def records_between(settings, topic: str, bounds: dict[int, tuple[int, int]]) -> int:
    """Committed records of ``topic`` at offsets [a, b) of each partition, read by the test's own consumer."""
    consumer = judge_consumer(settings)
    total = 0
    try:
        for p, (a, b) in sorted(bounds.items()):
            if b <= a:
                continue
            consumer.assign([TopicPartition(topic, p, a)])
            while True:
                msg = consumer.poll(10)
                assert msg is not None, f"{topic}[{p}] did not answer between offsets {a} and {b}"
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    if consumer.position([TopicPartition(topic, p)])[0].offset >= b:
                        break  # the rest up to b were transaction markers
                    continue
                if msg.offset() >= b:
                    break
                total += 1
    finally:
        consumer.close()
    return total


def test_iceberg_ingestion_output_statistics_are_the_rows_its_snapshots_added(settings, told):
    run = told["iceberg-ingestion"]
    period = run["facets"]["conservation_period"]
    flink_job = run["facets"]["flink_deployment"]["jobId"]
    stated = dataset_facets(run, "output", ICEBERG_ORDERS)["outputStatistics"]["rowCount"]
    others = period["otherWriters"].get(qualified(ICEBERG_ORDERS), 0)
    start, end = int(period["start"]["snapshot"]), int(period["end"]["snapshot"])

    table = load_catalog(settings).load_table("default.orders")
    own = foreign = 0
    current = end
    while current != start:
        snapshot = table.snapshot_by_id(current)
        assert snapshot is not None, f"snapshot {current} (between {start} and {end}) is no longer in the table"
        s = snapshot.summary.additional_properties if snapshot.summary else {}
        net = (
            int(s.get("added-records", 0))
            - int(s.get("deleted-records", 0))
            - int(s.get("added-position-deletes", 0))
            + int(s.get("removed-position-deletes", 0))
        )
        if s.get("flink.job-id") == flink_job:
            own += net
        else:
            foreign += net
        assert snapshot.parent_snapshot_id is not None, f"{start} is not an ancestor of {end}"
        current = snapshot.parent_snapshot_id
    print(f"iceberg-ingestion: snapshots {start}..{end}: the job's add {own}, others {foreign}; stated {stated}")
    assert own > 0
    assert stated == own
    assert others == foreign

    # the input: records of orders between the two cuts' last stable offsets
    ends = {
        int(p): (period["start"]["orders offsets"][p][1], b) for p, (_, b) in period["end"]["orders offsets"].items()
    }
    gave = dataset_facets(run, "input", ORDERS)["inputStatistics"]["rowCount"]
    assert gave == records_between(settings, "orders", ends)


def test_the_archive_sink_output_statistics_are_the_lines_of_the_objects_it_gained(settings, told, s3):
    run = told["orders-s3-sink"]
    period = run["facets"]["conservation_period"]
    stated = dataset_facets(run, "output", ARCHIVE)["outputStatistics"]["rowCount"]
    others = period["otherWriters"].get(qualified(ARCHIVE), 0)

    folders: dict[int, list[tuple[int, str]]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="orders-archive", Prefix="topics/orders/"):
        for obj in page.get("Contents", []):
            if (m := KEY.fullmatch(obj["Key"])) and m[1] == m[2]:
                folders.setdefault(int(m[1]), []).append((int(m[3]), obj["Key"]))
    gained: list[str] = []
    for p, bounds in period["end"]["partitions"].items():
        first, last = period["start"]["partitions"][p]["objects"], bounds["objects"]
        keys = [key for _, key in sorted(folders.get(int(p), []))]
        assert len(keys) >= last, f"partition {p}: {len(keys)} objects listed now, {last} at the period's end"
        gained += keys[first:last]
    lines = sum(s3.get_object(Bucket="orders-archive", Key=key)["Body"].read().decode().count("\n") for key in gained)
    print(f"orders-s3-sink: {len(gained)} objects gained, {lines} lines; stated {stated}, other writers {others}")
    assert lines > 0
    assert stated + others == lines

    ends = {int(p): (period["start"]["partitions"][p]["end"], b["end"]) for p, b in period["end"]["partitions"].items()}
    gave = dataset_facets(run, "input", ORDERS)["inputStatistics"]["rowCount"]
    assert gave == records_between(settings, "orders", ends)


def test_the_supplier_stats_run_carries_input_and_output_statistics(settings, told):
    run = told["supplier-stats"]
    period = run["facets"]["conservation_period"]
    wrote = dataset_facets(run, "output", SUPPLIER_STATS)["outputStatistics"]["rowCount"]
    gave = dataset_facets(run, "input", ORDERS)["inputStatistics"]["rowCount"]
    print(f"supplier-stats: input {gave}, output {wrote}, period {period['startTime']}..{period['endTime']}")
    assert wrote > 0
    # in: committed orders below the group's committed offsets at each cut
    bounds = {int(p): (period["start"]["orders"][p], c) for p, c in period["end"]["orders"].items()}
    assert gave == records_between(settings, "orders", bounds)
