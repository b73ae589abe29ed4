"""Fixtures of the pipeline's service tests."""

from __future__ import annotations

import json
import sqlite3

import dagster as dg
import pytest

from lineage_assets.resources import LineageResource, build_resources


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
