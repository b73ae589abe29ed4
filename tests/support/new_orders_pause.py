"""Pausing the stack's new-orders sensor while something else writes Iceberg orders in bulk (a test that computes
its days itself, a benchmark): the daemon would otherwise run Spark over the same days alongside, on the same
cores. When it is on again its cursor is at a materialization that reports what was written meanwhile: nothing is
requested for it later."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES

from infra.services.dagster import DagsterDev
from infra.services.iceberg_catalog import load_catalog
from infra.settings import StackSettings
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.main_job import BATCH_SENSOR
from lineage_assets.metadata import asset_key
from lineage_assets.spark.new_orders_sensor import reported_snapshot
from tests.support.stack_dagster import set_sensor_cursor, start_sensor, stop_sensor

#: how long the Flink job sensor may take to report the snapshot the block ended at
REPORT_WAIT_S = 180


#: the jobs the stack's daemon runs on its own that write supplier_stats (the sensor's and the finalise schedule's)
SUPPLIER_STATS_JOBS = ("supplier_stats_days_job", "supplier_stats_finalise_job")
#: how long a supplier_stats run already asked for may take to end
RUN_END_WAIT_S = 600


def wait_for_runs_it_asked_for(settings: StackSettings) -> None:
    """Until no supplier_stats run the daemon was asked for before the sensor stopped is queued or running: inside the
    block nothing but its own writer changes supplier_stats."""
    deadline = time.monotonic() + RUN_END_WAIT_S
    with dg.DagsterInstance.from_config(str(DagsterDev(settings).dagster_home)) as instance:
        while True:
            unfinished = [
                r.run_id
                for job in SUPPLIER_STATS_JOBS
                for r in instance.get_runs(
                    filters=dg.RunsFilter(job_name=job, statuses=list(NOT_FINISHED_STATUSES)), limit=20
                )
            ]
            if not unfinished:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"supplier_stats runs {unfinished} did not end within {RUN_END_WAIT_S} s")
            time.sleep(2)


@contextmanager
def new_orders_sensor_paused(settings: StackSettings) -> Iterator[None]:
    """The stack's new-orders sensor off inside the block; then on again, its cursor at the first materialization
    of the orders table that reports the snapshot current when the block ended, or a later one (those days are done,
    or are the writer's own business). The Flink job sensor records it within a tick or two."""
    orders = Pipeline.from_settings(settings).dataset("iceberg_orders")
    stop_sensor(settings, BATCH_SENSOR)
    try:
        wait_for_runs_it_asked_for(settings)
        yield
    finally:
        table = load_catalog(settings).load_table(orders.symlinks[0].name)
        at_end = table.current_snapshot()
        after_ms = at_end.timestamp_ms if at_end else 0
        cursor = None
        deadline = time.monotonic() + REPORT_WAIT_S
        with dg.DagsterInstance.from_config(str(DagsterDev(settings).dagster_home)) as instance:
            while cursor is None:
                committed = {s.snapshot_id: s.timestamp_ms for s in table.refresh().snapshots()}
                for record in instance.fetch_materializations(asset_key(orders), limit=20).records:
                    snapshot = reported_snapshot(record)
                    if at_end is None or committed.get(snapshot, -1) >= after_ms:
                        cursor = str(record.storage_id)
                        break
                if cursor is None:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"no materialization of {asset_key(orders).to_user_string()} reported snapshot "
                            f"{at_end.snapshot_id} within {REPORT_WAIT_S} s: is flink_job_sensor running? The "
                            f"new-orders sensor stays stopped; start it from the UI once it has"
                        )
                    time.sleep(2)
        set_sensor_cursor(settings, BATCH_SENSOR, cursor)
        start_sensor(settings, BATCH_SENSOR)
