"""``lineage-lab impact orders.price`` against the Marquez the main job filled.

The judge is the reference lab's data flow, written out here by hand for the embedded stack's identities: Kafka
``orders.price`` flows into the archive's ``price`` (orders-s3-sink), Kafka ``supplier-stats.total_price``
(supplier-stats), Iceberg ``default/orders.price`` (iceberg-ingestion) and from there into Iceberg
``default/supplier_stats.total_price`` (the Spark application's overwrite action). What Marquez holds is read from
its REST API (lineage and column-lineage endpoints) by a small walker written here, and what the CLI prints is
compared with the same hand-written expectation; neither side asks the code under test what to expect."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import pytest
import requests

from infra.settings import REPO_ROOT
from tests.support.engine_waits import wait_for_delivery
from tests.support.new_orders_pause import new_orders_sensor_paused

KAFKA = "kafka://127.0.0.1:9092"
ARCHIVE = "s3://orders-archive"
WAREHOUSE = "s3://warehouse"
JOBS_NAMESPACE = "lineage-lab"

#: (namespace, dataset, column) derived, directly or further down, from Kafka orders.price
EXPECTED_COLUMNS = {
    (KAFKA, "supplier-stats", "total_price"),
    (ARCHIVE, "topics/orders", "price"),
    (WAREHOUSE, "default/orders", "price"),
    (WAREHOUSE, "default/supplier_stats", "total_price"),
}
#: every dataset written by a job downstream of Kafka orders (the three jobs' dead-letter topics included)
EXPECTED_DATASETS = {
    (KAFKA, "supplier-stats"),
    (KAFKA, "orders-dlq"),
    (KAFKA, "orders-dlq-flink"),
    (KAFKA, "orders-dlq-supplier-stats"),
    (ARCHIVE, "topics/orders"),
    (WAREHOUSE, "default/orders"),
    (WAREHOUSE, "default/supplier_stats"),
}
#: the pipeline's jobs downstream of Kafka orders; Marquez files the Spark application's edges on its action job
EXPECTED_JOBS = {
    "orders-s3-sink",
    "supplier-stats",
    "iceberg-ingestion",
    "dagster.supplier_stats.overwrite_by_expression.lakehouse_default_supplier_stats",
}
#: the Dagster asset keys of EXPECTED_DATASETS
EXPECTED_ASSETS = [
    "iceberg/default/orders",
    "iceberg/default/supplier_stats",
    "kafka/dead_letters/orders_dlq",
    "kafka/dead_letters/orders_dlq_flink",
    "kafka/dead_letters/orders_dlq_supplier_stats",
    "kafka/supplier_stats",
    "s3/orders_archive",
]


@pytest.fixture(scope="module", autouse=True)
def batch_side_still(settings, pipeline_ran):
    """Marquez's dataset graph follows each job's current version, and a Spark run the new-orders sensor launches
    changes the action job's while it runs (the fresh clones of fd73922 and 56c06c2 read `default/supplier_stats`
    missing from it, once in the CLI's read and once in the walker's). So the sensor is paused, the runs it asked
    for have ended and what they emitted is delivered: both reads see a graph that holds still."""
    with new_orders_sensor_paused(settings):
        wait_for_delivery(settings, time.time())
        yield


def reachable(start, nexts) -> set:
    seen, queue = {start}, deque([start])
    while queue:
        for nxt in nexts(queue.popleft()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen - {start}


def marquez_downstream(marquez_url: str) -> tuple[set, set, set]:
    """(columns, datasets, jobs) downstream of Kafka orders.price as Marquez's REST API holds them."""
    api = f"{marquez_url}/api/v1"
    graph = requests.get(
        f"{api}/lineage", params={"nodeId": f"dataset:{KAFKA}:orders", "depth": 20}, timeout=30
    ).json()["graph"]
    nodes = {n["id"]: n for n in graph}
    out = {n["id"]: [e["destination"] for e in n.get("outEdges") or []] for n in graph}
    below = [nodes[i] for i in reachable(f"dataset:{KAFKA}:orders", lambda i: out.get(i, [])) if i in nodes]
    datasets = {(n["data"]["namespace"], n["data"]["name"]) for n in below if n["type"] == "DATASET"}
    jobs = {(n["data"]["namespace"], n["data"]["name"]) for n in below if n["type"] == "JOB"}

    fields = requests.get(
        f"{api}/column-lineage",
        params={"nodeId": f"datasetField:{KAFKA}:orders:price", "depth": 20, "withDownstream": "true"},
        timeout=30,
    ).json()["graph"]
    derived: dict[tuple, set] = {}
    for node in fields:
        data = node.get("data") or {}
        for f in data.get("inputFields") or []:
            derived.setdefault((f["namespace"], f["dataset"], f["field"]), set()).add(
                (data["namespace"], data["dataset"], data["field"])
            )
    columns = reachable((KAFKA, "orders", "price"), lambda ref: derived.get(ref, set()))
    return columns, datasets, jobs


def test_the_expectation_is_for_this_deployment(settings):
    """The literals above are the embedded stack's identities."""
    assert settings.kafka_bootstrap == "127.0.0.1:9092", settings.kafka_bootstrap
    assert (settings.archive_bucket, settings.warehouse_bucket) == ("orders-archive", "warehouse")
    assert settings.openlineage_namespace == JOBS_NAMESPACE


def test_marquez_holds_the_reference_flow_downstream_of_orders_price(settings, pipeline_ran):
    columns, datasets, jobs = marquez_downstream(settings.marquez_url)
    assert columns == EXPECTED_COLUMNS
    assert datasets == EXPECTED_DATASETS
    assert {name for ns, name in jobs if ns == JOBS_NAMESPACE} == EXPECTED_JOBS


def test_the_cli_prints_the_reference_flow_downstream_of_orders_price(pipeline_ran):
    cli = subprocess.run(
        [str(Path(sys.executable).with_name("lineage-lab")), "impact", "orders.price", "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    printed = json.loads(cli.stdout)
    assert printed["target"] == {"namespace": KAFKA, "name": "orders", "column": "price"}
    assert {(c["namespace"], c["name"], c["column"]) for c in printed["columns"]} == EXPECTED_COLUMNS
    assert {(d["namespace"], d["name"]) for d in printed["datasets"]} == EXPECTED_DATASETS
    assert {j["name"] for j in printed["jobs"] if j["namespace"] == JOBS_NAMESPACE} == EXPECTED_JOBS
    assert printed["assets"] == EXPECTED_ASSETS
