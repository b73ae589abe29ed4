"""Which supplier_stats days new Iceberg snapshots touched: read from each snapshot's partition summary along the
snapshot chain since the last one handled."""

import pytest

from lineage_assets.spark.new_orders_sensor import (
    PartitionSummaryMissing,
    SnapshotInfo,
    days_changed,
    last_handled_before,
    snapshots_since,
)


def summary(*days: str) -> dict[str, str]:
    out = {"changed-partition-count": str(len(days)), "partition-summaries-included": "true"}
    out.update({f"partitions.bid_time_day={d}": "added-data-files=1,added-records=3" for d in days})
    return out


def test_days_come_from_the_partition_summary():
    assert days_changed(summary("2026-11-22", "2026-11-23"), "bid_time_day") == {"2026-11-22", "2026-11-23"}
    assert days_changed({"changed-partition-count": "0"}, "bid_time_day") == set()
    assert days_changed({**summary(), "partitions.bid_time_day=null": "x"}, "bid_time_day") == set()


def test_a_summary_without_partitions_is_an_error_that_says_why():
    with pytest.raises(PartitionSummaryMissing, match=r"write\.summary\.partition-limit"):
        days_changed({"changed-partition-count": "500"}, "bid_time_day")


def test_only_the_snapshots_after_the_last_handled_one_oldest_first():
    chain = [
        SnapshotInfo(1, None, summary("2026-11-20")),
        SnapshotInfo(2, 1, summary("2026-11-21")),
        SnapshotInfo(3, 2, summary("2026-11-22")),
        SnapshotInfo(9, 1, summary("1999-01-01")),  # an expired branch: not on the chain
    ]
    assert [s.snapshot_id for s in snapshots_since(chain, 3, 1)] == [2, 3]
    assert [s.snapshot_id for s in snapshots_since(chain, 3, None)] == [1, 2, 3]
    assert snapshots_since(chain, 3, 3) == []
    assert snapshots_since(chain, None, None) == []


def test_the_first_tick_starts_at_the_last_snapshot_committed_before_the_deployment():
    chain = [
        SnapshotInfo(1, None, summary("2026-11-20"), committed_ms=1_000),
        SnapshotInfo(2, 1, summary("2026-11-21"), committed_ms=2_000),
        SnapshotInfo(3, 2, summary("2026-11-22"), committed_ms=3_000),
    ]
    assert last_handled_before(chain, 3, deployed_ms=2_500) == 2
    assert last_handled_before(chain, 3, deployed_ms=2_000) == 2, "a snapshot of the deployment's instant is old"
    assert last_handled_before(chain, 3, deployed_ms=500) is None, "all of them came after: all are handled"
    assert last_handled_before(chain, 3, deployed_ms=9_000) == 3
    assert last_handled_before([], None, deployed_ms=9_000) is None


def test_the_handled_snapshot_is_the_one_the_cursor_materialization_reported():
    import dagster as dg

    from lineage_assets.spark.new_orders_sensor import handled_snapshot

    key = dg.AssetKey(["iceberg", "default", "orders"])
    with dg.DagsterInstance.ephemeral() as instance:
        for metadata in (
            {"iceberg/snapshot_id": "5"},
            {},
            {"iceberg/snapshot_id": "none yet"},
            {"iceberg/snapshot_id": "7"},
        ):
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=key, metadata=metadata))
        ids = [r.storage_id for r in instance.fetch_materializations(key, limit=10, ascending=True).records]
        # a materialization without a snapshot (a deployment of an empty table): the newest one before it counts
        assert [handled_snapshot(instance, key, str(i)) for i in ids] == [5, 5, 5, 7]
        assert handled_snapshot(instance, key, None) is None


# --- exact values (issue 28: each pins a mutant of the day computation; see docs/mutation.md) ---------------------
def test_a_summary_that_names_no_change_changed_no_day():
    assert days_changed({}, "bid_time_day") == set()
    assert days_changed({"changed-partition-count": ""}, "bid_time_day") == set()


def test_the_error_says_how_many_partitions_changed_and_why_they_are_not_named():
    with pytest.raises(PartitionSummaryMissing) as err:
        days_changed({"changed-partition-count": "7"}, "bid_time_day")
    assert str(err.value) == (
        "the snapshot changed 7 partition(s) but its summary does not name them (more than "
        "write.summary.partition-limit, or the table lacks that property)"
    )


def test_the_day_is_read_from_its_own_field_of_a_multi_field_partition():
    keys = {
        "partitions.supplier=Alice/bid_time_day=2026-11-22": "added-records=1",
        "partitions.bid_time_day=2026-11-23=x": "added-records=1",  # the value is everything after the first "="
    }
    got = days_changed({"partition-summaries-included": "true", **keys}, "bid_time_day")
    assert got == {"2026-11-22", "2026-11-23=x"}


# --- the cursor and the freshness budget (a tick against an ephemeral Dagster instance; the catalog is never asked:
# no new orders materialization, only days owed from earlier ticks) ---------------------------------------------

import json  # noqa: E402
import time  # noqa: E402

import dagster as dg  # noqa: E402

from infra.settings import StackSettings  # noqa: E402
from lineage_assets.lineage.identity import Pipeline  # noqa: E402
from lineage_assets.spark.new_orders_sensor import Cursor, build_supplier_stats_partition_sensor  # noqa: E402
from lineage_assets.spark.supplier_stats_batch import build_supplier_stats_asset  # noqa: E402
from lineage_assets.storage import IcebergResource  # noqa: E402

NOWHERE = IcebergResource(uri="http://127.0.0.1:9", s3_endpoint="http://127.0.0.1:9", access_key_id="a",
                          secret_access_key="s", region="us-east-1")  # fmt: skip
STATS = dg.AssetKey(["iceberg", "default", "supplier_stats"])


def test_cursors_of_every_earlier_form_are_read():
    assert Cursor.parse(None) == Cursor()
    assert Cursor.parse("42") == Cursor(42)
    assert Cursor.parse('{"snapshot": 7}') == Cursor(legacy_snapshot=7)
    again = Cursor.parse('{"storage_id": 42, "owed": {"2026-03-02": "9"}}')
    assert again == Cursor(42, {"2026-03-02": 9})
    assert json.loads(again.dump()) == {"storage_id": 42, "owed": {"2026-03-02": 9}}


def tick(budget_s: int, instance: dg.DagsterInstance, cursor: str):
    pipeline = Pipeline.from_settings(StackSettings())
    sensor = build_supplier_stats_partition_sensor(pipeline, name="budget_test", freshness_s=budget_s)
    unused = dg.ResourceDefinition.none_resource()  # the asset is only there to name the job's partitions
    defs = dg.Definitions(
        assets=[build_supplier_stats_asset(pipeline)],
        sensors=[sensor],
        resources={"iceberg": NOWHERE, "spark": unused, "lineage": unused},
    )
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, definitions=defs, resources={"iceberg": NOWHERE}
    ) as ctx:
        return sensor.evaluate_tick(ctx)


def test_an_owed_day_never_written_is_asked_for_at_once_incrementally():
    with dg.DagsterInstance.ephemeral() as instance:
        result = tick(300, instance, Cursor(None, {"2026-03-02": 9}).dump())
    (request,) = result.run_requests
    assert (request.run_key, request.partition_key) == ("9:2026-03-02", "2026-03-02")
    assert request.run_config == {"ops": {"iceberg__default__supplier_stats": {"config": {"mode": "incremental"}}}}
    assert json.loads(result.cursor) == {"storage_id": None, "owed": {}}


def test_a_day_written_just_now_waits_for_the_budget_and_stays_owed():
    with dg.DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=STATS, partition="2026-03-02"))
        before = time.time()
        result = tick(300, instance, Cursor(None, {"2026-03-02": 9}).dump())
        assert not result.run_requests
        assert json.loads(result.cursor)["owed"] == {"2026-03-02": 9}
        assert "owed, due within the freshness budget: 2026-03-02 at " in result.skip_message
        # a budget of 0: the same day is asked for now
        assert [r.run_key for r in tick(0, instance, result.cursor).run_requests] == ["9:2026-03-02"]
    assert time.time() - before < 300, "the budget cannot have passed: the deferral above is the budget's"
