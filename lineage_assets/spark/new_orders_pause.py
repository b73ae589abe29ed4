"""Pausing the stack's new-orders sensor while something else writes Iceberg orders in bulk (a test that computes
its days itself, a benchmark): the daemon would otherwise run Spark over the same days alongside, on the same
cores. When it is on again its cursor is past what was written meanwhile: nothing is requested for it later."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from infra.services.dagster import DagsterDev, dagster_cli
from infra.services.iceberg_catalog import load_catalog
from infra.settings import REPO_ROOT, StackSettings
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.main_run import BATCH_SENSOR
from lineage_assets.metadata import asset_key


def stack_sensor(settings: StackSettings, *args: str) -> None:
    """``dagster sensor ARGS`` against the stack's instance (what the UI's sensor page does)."""
    result = dagster_cli(DagsterDev(settings).dagster_home, REPO_ROOT / "workspace.yaml", "sensor", *args)
    if result.returncode != 0:
        raise RuntimeError(f"`dagster sensor {' '.join(args)}` failed: {(result.stderr or result.stdout)[-500:]}")


@contextmanager
def new_orders_sensor_paused(settings: StackSettings) -> Iterator[None]:
    """The stack's new-orders sensor off inside the block; then on again, its cursor at the latest Iceberg snapshot
    and materialization of the orders table (those days are done, or are the writer's own business)."""
    orders = Pipeline.from_settings(settings).dataset("iceberg_orders")
    stack_sensor(settings, "stop", BATCH_SENSOR)
    try:
        yield
    finally:
        with dg.DagsterInstance.from_config(str(DagsterDev(settings).dagster_home)) as instance:
            latest = instance.fetch_materializations(asset_key(orders), limit=1).records
        snapshot = load_catalog(settings).load_table(orders.symlinks[0].name).current_snapshot()
        cursor = {"event": latest[0].storage_id if latest else 0, "snapshot": getattr(snapshot, "snapshot_id", None)}
        stack_sensor(settings, "cursor", BATCH_SENSOR, "--set", json.dumps(cursor))
        stack_sensor(settings, "start", BATCH_SENSOR)
