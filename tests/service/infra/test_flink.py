"""PyFlink jobs on the session cluster: one streaming job seen and cancelled over REST, one batch Flink SQL job
reading the Iceberg table that Spark wrote, through the same REST catalog."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import requests

from infra.services.flink import flink_cli
from tests.service.infra.conftest import ROWS

JOBS = Path(__file__).parent / "pyflink"


def _job_by_name(settings, name: str) -> dict | None:
    jobs = requests.get(f"{settings.flink_rest_url}/jobs/overview", timeout=5).json()["jobs"]
    return next((j for j in jobs if j["name"] == name), None)


def _wait_state(settings, name: str, wanted: str, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    job = None
    while time.monotonic() < deadline:
        job = _job_by_name(settings, name)
        if job and job["state"] == wanted:
            return job
        time.sleep(1)
    raise AssertionError(f"job {name!r} not {wanted} after {timeout}s: {job}")


def test_pyflink_job_runs_on_the_cluster_and_cancels_over_rest(settings):
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    result = flink_cli(settings, "run", "-d", "-py", str(JOBS / "streaming_smoke.py"), name)
    assert result.returncode == 0, result.stdout + result.stderr
    job = _wait_state(settings, name, "RUNNING")

    # the job turns RUNNING before its tasks (and their Python workers) are up
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        detail = requests.get(f"{settings.flink_rest_url}/jobs/{job['jid']}", timeout=5).json()
        if {v["status"] for v in detail["vertices"]} == {"RUNNING"}:
            break
        time.sleep(1)
    assert {v["status"] for v in detail["vertices"]} == {"RUNNING"}, detail["vertices"]

    assert requests.patch(f"{settings.flink_rest_url}/jobs/{job['jid']}", params={"mode": "cancel"}, timeout=5).ok
    _wait_state(settings, name, "CANCELED")


def test_flink_sql_reads_the_iceberg_table_spark_wrote(settings, spark_table):
    _, namespace, _ = spark_table
    result = flink_cli(
        settings,
        "run",
        "-py",
        str(JOBS / "read_iceberg.py"),
        settings.iceberg_catalog_url,
        namespace,
        "orders",
        settings.s3_endpoint,
        settings.s3_access_key,
        settings.s3_secret_key,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = sorted(json.loads(line[4:]) for line in result.stdout.splitlines() if line.startswith("ROW "))
    expected = sorted(
        [oid, item, f"{price:.2f}", supplier, ts.strftime("%Y-%m-%d %H:%M:%S.%f")]  # Iceberg timestamp: TIMESTAMP(6)
        for oid, item, price, supplier, ts in ROWS
    )
    assert rows == expected
