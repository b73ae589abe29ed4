"""A store that accepts connections and never answers (the Iceberg catalog, SIGSTOPped): `lineage-lab reconcile`
ends, the hops that read the catalog say unknown naming it and the others are counted; a Flink sensor tick still
reports both jobs' states, and says the catalog did not answer where the table's facts would be. Once the catalog is
resumed, the next tick reads the table again.

The timeouts are set low for the test (2 s to connect, 3 s per answer) through the settings a deployment uses."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pytest
import requests

from infra.services.base import read_pid
from infra.services.iceberg_catalog import IcebergCatalog
from infra.settings import REPO_ROOT
from lineage_assets.flink.sensor import build_flink_job_sensor
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources
from tests.service.lineage_assets.conftest import evaluate_sensor, private_lineage

pytestmark = pytest.mark.service

TIMEOUTS = {"LINEAGE_LAB_STORE_CONNECT_TIMEOUT_S": "2", "LINEAGE_LAB_STORE_READ_TIMEOUT_S": "3"}
#: only a guard against a hang (the suite goes on): reconcile takes a minute or two with every store answering
RECONCILE_GUARD_S = 900
#: the hops whose figures come from the Iceberg catalog (iceberg-ingestion writes it, the Spark job reads it)
CATALOG_HOPS = {"iceberg-ingestion", "dagster.supplier_stats"}


@contextmanager
def stopped(settings) -> Iterator[None]:
    """The catalog SIGSTOPped for the block; a client still waiting after RECONCILE_GUARD_S fails the test (and the
    catalog is resumed) instead of hanging the suite."""
    pid = read_pid(IcebergCatalog(settings))
    assert pid, "the Iceberg catalog is not running: lineage-lab stack up"

    def still_waiting(*_):
        raise AssertionError(f"still waiting on the stopped catalog after {RECONCILE_GUARD_S} s")

    previous = signal.signal(signal.SIGALRM, still_waiting)
    signal.alarm(RECONCILE_GUARD_S)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def short(settings):
    return dataclasses.replace(settings, store_connect_timeout_s=2.0, store_read_timeout_s=3.0)


def test_reconcile_ends_with_the_catalog_hops_unknown_naming_it_and_counts_the_others(settings, pipeline_ran):
    with stopped(settings):
        ran = subprocess.run(
            # no second look at a hop that looks lost or doubled (25 s by default): only what it counted is judged
            [sys.executable, "-m", "lineage_assets.cli", "reconcile", "--json", "--confirm-after", "0"],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env={**os.environ, **TIMEOUTS},
            timeout=RECONCILE_GUARD_S,
        )
    assert ran.returncode in (0, 1, 2), ran.stderr[-2000:]
    hops = {hop["job"]: hop for hop in json.loads(ran.stdout)}
    assert set(hops) >= CATALOG_HOPS, sorted(hops)
    for job in CATALOG_HOPS:
        assert hops[job]["status"] == "unknown", hops[job]
        assert settings.iceberg_catalog_url in json.dumps(hops[job]), f"{job} does not name the catalog: {hops[job]}"
    others = {job: hop for job, hop in hops.items() if job not in CATALOG_HOPS}
    assert others, sorted(hops)
    for job, hop in others.items():
        assert settings.iceberg_catalog_url not in json.dumps(hop), f"{job} waited on the catalog: {hop}"
        assert hop["in"] is not None, f"{job} was not counted: {hop}"


def flink_states(settings) -> dict[str, str]:
    """The state of each job name's newest Flink job, from Flink's REST API."""
    jobs = requests.get(f"{settings.flink_rest_url}/jobs/overview", timeout=10).json()["jobs"]
    return {j["name"]: j["state"] for j in sorted(jobs, key=lambda j: j["start-time"])}


def catalog_answers(settings) -> None:
    """Wait until the resumed catalog answers its configuration endpoint (it first works off what queued while it
    was stopped); fails after RECONCILE_GUARD_S."""
    deadline = time.monotonic() + RECONCILE_GUARD_S
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{settings.iceberg_catalog_url}/v1/config", timeout=30).ok:
                return
        time.sleep(1)
    pytest.fail(f"the Iceberg catalog did not answer within {RECONCILE_GUARD_S} s of its resume")


def test_a_flink_sensor_tick_reports_both_jobs_and_says_the_catalog_did_not_answer(
    settings, short, pipeline_ran, tmp_path
):
    pipeline = Pipeline.from_settings(settings)
    sensor = build_flink_job_sensor(pipeline, settings.streaming_fresh_minutes)
    lineage = private_lineage(settings, tmp_path)
    table = pipeline.dataset("iceberg_orders")
    states = flink_states(settings)
    expected = {
        "/".join(pipeline.dataset(job.outputs[0]).asset_key): states[name]
        for name, job in pipeline.jobs.items()
        if job.integration == "FLINK"
    }
    with dg.DagsterInstance.ephemeral() as instance:
        with stopped(settings):
            during = evaluate_sensor(sensor, instance, {**build_resources(short), "lineage": lineage}, None)
        catalog_answers(settings)
        after = evaluate_sensor(sensor, instance, {**build_resources(settings), "lineage": lineage}, during.cursor)

    def observed(result) -> dict[str, dict]:
        return {
            e.asset_key.to_user_string(): {k: v.value for k, v in e.metadata.items()}
            for e in result.asset_events
            if isinstance(e, dg.AssetObservation)
        }

    seen = observed(during)
    iceberg_key = "/".join(table.asset_key)
    assert {key: facts["state"] for key, facts in seen.items()} == expected, seen
    assert settings.iceberg_catalog_url in seen[iceberg_key]["iceberg"]
    assert "did not answer" in seen[iceberg_key]["iceberg"]
    assert "iceberg/snapshot_id" not in seen[iceberg_key]
    caught_up = [e for e in during.asset_events if isinstance(e, dg.AssetMaterialization)]
    assert all(e.asset_key.to_user_string() != iceberg_key for e in caught_up), "a materialization of an unread table"

    resumed = observed(after)[iceberg_key]
    assert "iceberg" not in resumed, resumed
    assert resumed["iceberg/snapshot_id"] != "none"
