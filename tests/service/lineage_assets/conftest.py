"""Fixtures of the pipeline's service tests."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Callable
from urllib.parse import quote

import dagster as dg
import pytest
import requests

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez import MarquezClient
from lineage_assets.lineage.outbox import Drainer, Outbox
from lineage_assets.resources import LineageResource, build_resources

#: OpenLineage job namespace of tests that make the pipeline's jobs fail or stop on purpose: their runs go to
#: Marquez beside the pipeline's jobs, never on top of them
TEST_JOB_NAMESPACE = "lineage-lab-tests"


def pipeline_for_tests(settings) -> Pipeline:
    """The pipeline's identities with its jobs in TEST_JOB_NAMESPACE (datasets unchanged)."""
    return Pipeline.from_settings(dataclasses.replace(settings, openlineage_namespace=TEST_JOB_NAMESPACE))


@pytest.fixture(scope="module", autouse=True)
def forget_test_jobs(settings):
    """After each module, the jobs it ran in TEST_JOB_NAMESPACE are deleted (hidden) in Marquez, so the shared
    Marquez shows the pipeline's own graph again (its UI would draw a test's failed sink beside the real one)."""
    yield
    api = f"{settings.marquez_url}/api/v1/namespaces/{quote(TEST_JOB_NAMESPACE, safe='')}/jobs"
    for job in MarquezClient(settings.marquez_url).jobs(TEST_JOB_NAMESPACE):
        requests.delete(f"{api}/{quote(job['name'], safe='')}", timeout=10)


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
