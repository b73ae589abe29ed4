"""Orders with yesterday's and today's bid_time go the real way (Postgres -> Debezium -> Kafka -> iceberg-ingestion
-> Iceberg): the supplier_stats sensor then requests exactly those two days, once; a tick without a new snapshot
requests nothing, and a restarted Dagster (the same stored cursor) requests nothing twice. Where nothing is requested,
the tick says why (its skip message); with the catalog unreachable the tick fails instead of skipping, so Dagster
keeps the cursor. Under a freshness budget a day written just now is owed, not asked for, until the budget passes."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from decimal import Decimal

import dagster as dg
import pytest
from pyiceberg.expressions import In

from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.jobs import STREAMING
from lineage_assets.metadata import asset_key
from lineage_assets.source.orders import ensure_table
from lineage_assets.spark.new_orders_sensor import (
    CatalogUnavailable,
    build_supplier_stats_partition_sensor,
    owed_days,
)
from lineage_assets.storage import IcebergResource
from tests.service.lineage_assets.conftest import wait_until_quiet

defs = build_definitions(StackSettings.from_env())
STATS = dg.AssetKey(["iceberg", "default", "supplier_stats"])


@pytest.fixture(scope="module")
def deployed(pipeline):
    """The source side and iceberg-ingestion running (a no-op when they already run)."""
    keys = [asset_key(pipeline.dataset(k)) for k in STREAMING if k != "kafka_supplier_stats"]
    result = dg.materialize(
        [*defs.assets], selection=dg.AssetSelection.assets(*keys), resources=defs.resources, raise_on_error=False
    )
    assert result.success


def tick(sensor, instance, cursor: str | None, resources=None):
    """One evaluation as the daemon runs it: the run requests, the cursor Dagster stores afterwards and the skip
    message (None when it requested runs)."""
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=resources or defs.resources, definitions=defs
    ) as ctx:
        result = sensor.evaluate_tick(ctx)
    return list(result.run_requests or []), result.cursor or cursor, result.skip_message


def test_an_unreachable_catalog_fails_the_tick_instead_of_skipping(pipeline):
    sensor = build_supplier_stats_partition_sensor(pipeline, name="test_new_orders_sensor_no_catalog")
    key = asset_key(pipeline.dataset("iceberg_orders"))
    live = defs.resources["iceberg"]
    nowhere = IcebergResource(
        uri="http://127.0.0.1:9",  # the discard port: nothing listens
        s3_endpoint=live.s3_endpoint,
        access_key_id=live.access_key_id,
        secret_access_key=live.secret_access_key,
        region=live.region,
    )
    with dg.DagsterInstance.ephemeral() as instance:
        reported = dg.AssetMaterialization(asset_key=key, metadata={"iceberg/snapshot_id": "1"})
        instance.report_runless_asset_event(reported)
        with pytest.raises(CatalogUnavailable, match=r"the Iceberg catalog at http://127\.0\.0\.1:9 did not answer"):
            tick(sensor, instance, None, resources={**defs.resources, "iceberg": nowhere})


def test_new_orders_request_exactly_their_days_once(settings, pipeline, deployed):
    sensor = build_supplier_stats_partition_sensor(pipeline, name="test_new_orders_sensor")
    orders = pipeline.dataset("iceberg_orders")
    key = asset_key(orders)
    table = defs.resources["iceberg"].catalog().load_table(orders.symlinks[0].name)
    wait_until_quiet(lambda: getattr(table.refresh().current_snapshot(), "snapshot_id", None), "Iceberg orders")
    with dg.DagsterInstance.ephemeral() as instance:

        def flink_sensor_reports_a_snapshot():
            snapshot = table.refresh().current_snapshot()
            snapshot_id = str(snapshot.snapshot_id) if snapshot else "none"
            instance.report_runless_asset_event(
                dg.AssetMaterialization(asset_key=key, metadata={"iceberg/snapshot_id": snapshot_id})
            )
            return snapshot_id

        watched = flink_sensor_reports_a_snapshot()
        requests, watching, skipped = tick(sensor, instance, None)
        cursor = watching
        assert requests == [], "the first tick starts watching from the current snapshot"
        assert skipped == (
            f"watching default.orders from snapshot {watched} on; backfill earlier days from the asset's page"
        )

        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        today, yesterday = now.date(), (now - dt.timedelta(days=1)).date()
        # bid times that are plausible at any hour (the valid-order rule dead-letters an order more than
        # order_max_future_s ahead): a day ago, and a moment ago but not before today's midnight
        bid_times = {
            yesterday: now - dt.timedelta(days=1),
            today: max(dt.datetime.combine(today, dt.time(0)), now - dt.timedelta(seconds=30)),
        }
        ids = [f"sensor-{uuid.uuid4()}" for _ in range(6)]
        rows = [(i, "Alice", "Lamp", "12.50", bid_times[d]) for i, d in zip(ids, [yesterday, today] * 3, strict=True)]
        with defs.resources["source_db"].connect() as conn:
            ensure_table(conn)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO public.orders (order_id, supplier, item, price, bid_time) VALUES (%s, %s, %s, %s, %s)",
                    rows,
                )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            found = table.refresh().scan(row_filter=In("order_id", ids), selected_fields=("order_id", "price"))
            arrow = found.to_arrow()
            if arrow.num_rows == len(ids):
                break
            time.sleep(2)
        assert arrow.num_rows == len(ids), "the orders did not reach Iceberg in 3 minutes"
        assert set(arrow.column("price").to_pylist()) == {Decimal("12.50")}

        flink_sensor_reports_a_snapshot()
        requests, cursor, skipped = tick(sensor, instance, cursor)
        assert skipped is None
        assert sorted(r.partition_key for r in requests) == [yesterday.isoformat(), today.isoformat()]
        assert sensor.job_name == "supplier_stats_days_job"
        days_job = defs.resolve_job_def(sensor.job_name)
        assert days_job.asset_layer.executable_asset_keys == {dg.AssetKey(["iceberg", "default", "supplier_stats"])}
        assert len({r.run_key for r in requests}) == 2
        modes = {r.run_config["ops"]["iceberg__default__supplier_stats"]["config"]["mode"] for r in requests}
        assert modes == {"incremental"}, "the sensor's runs add only what is new to each day"

        # the same snapshots under a one-hour freshness budget, today written just now: yesterday (never written) is
        # asked for at once, today is owed; a sensor of the same name with no budget then asks for it, once
        budgeted = build_supplier_stats_partition_sensor(pipeline, name="test_budget", freshness_s=3600)
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=STATS, partition=today.isoformat()))
        owed_requests, _, _ = tick(budgeted, instance, watching)
        assert [r.partition_key for r in owed_requests] == [yesterday.isoformat()]
        newest = {r.partition_key: r.run_key.split(":")[0] for r in requests}
        assert owed_days(instance, "test_budget") == {today.isoformat(): int(newest[today.isoformat()])}
        flink_sensor_reports_a_snapshot()  # the next report of the table (no new snapshot)
        unbudgeted = build_supplier_stats_partition_sensor(pipeline, name="test_budget", freshness_s=0)
        due, cursor, _ = tick(unbudgeted, instance, cursor)
        assert [(r.partition_key, r.run_key) for r in due] == [
            (today.isoformat(), f"{newest[today.isoformat()]}:{today.isoformat()}")
        ]
        assert owed_days(instance, "test_budget") == {}

        requests, _, skipped = tick(sensor, instance, cursor)
        assert requests == [], "no new materialization: nothing requested"
        assert skipped == "No new materialization events found for asset key AssetKey(['iceberg', 'default', 'orders'])"
        handled = flink_sensor_reports_a_snapshot()  # a materialization without a new snapshot
        requests, cursor, skipped = tick(sensor, instance, cursor)
        assert requests == [], "no new snapshot: nothing requested"
        assert skipped == "0 new snapshot(s), no day to recompute now"

    # a restarted Dagster: a new instance, the sensor's stored cursor, a fresh report of the snapshot handled last
    with dg.DagsterInstance.ephemeral() as restarted:
        restarted.report_runless_asset_event(
            dg.AssetMaterialization(asset_key=key, metadata={"iceberg/snapshot_id": handled})
        )
        requests, _, skipped = tick(sensor, restarted, cursor)
        assert requests == [], "after a restart nothing is requested twice"
        # the stored cursor is past the restarted instance's new record: Dagster hands the sensor nothing
        assert skipped == "No new materialization events found for asset key AssetKey(['iceberg', 'default', 'orders'])"
