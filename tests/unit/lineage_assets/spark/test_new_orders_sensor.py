"""Which supplier_stats days new Iceberg snapshots touched: read from each snapshot's partition summary along the
snapshot chain since the last one handled."""

import time

import dagster as dg
import pytest
from dagster._core.events import DagsterEvent, DagsterEventType

from lineage_assets.spark.new_orders_sensor import (
    SUPPLIER_STATS_DAYS_JOB,
    PartitionSummaryMissing,
    SnapshotInfo,
    days_changed,
    due_days,
    keep_owed,
    last_handled_before,
    last_write,
    owed_days,
    queued_days,
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


# --- the freshness budget: which owed days get a run now (hand-written figures), and where they are kept ---------


def test_due_days_under_a_300_s_budget():
    due = due_days(
        owed=["2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"],
        last_write={"2026-03-01": 1000.0, "2026-03-02": 1250.0, "2026-03-03": None, "2026-03-04": 1000.0},
        queued=["2026-03-04"],
        now=1300.0,
        budget_s=300.0,
    )
    # 03-01 written 300 s ago: due; 03-02 50 s ago: due at 1550; 03-03 never written: at once; 03-04 has a run waiting
    assert due.now == ("2026-03-01", "2026-03-03")
    assert dict(due.later) == {"2026-03-02": 1550.0}


def test_a_budget_of_zero_asks_for_every_owed_day_at_once():
    due = due_days(owed=["2026-03-02"], last_write={"2026-03-02": 1299.0}, queued=[], now=1300.0, budget_s=0)
    assert (due.now, dict(due.later)) == (("2026-03-02",), {})


def test_owed_days_are_kept_per_sensor_in_the_instance():
    with dg.DagsterInstance.ephemeral() as instance:
        assert owed_days(instance, "a") == {}
        keep_owed(instance, "a", {"2026-03-02": 9, "2026-03-01": 7})
        keep_owed(instance, "b", {"2026-03-05": 1})
        assert owed_days(instance, "a") == {"2026-03-01": 7, "2026-03-02": 9}
        keep_owed(instance, "a", {})
        assert owed_days(instance, "a") == {} and owed_days(instance, "b") == {"2026-03-05": 1}


def test_a_days_last_write_is_its_newest_materialization():
    stats = dg.AssetKey(["iceberg", "default", "supplier_stats"])
    with dg.DagsterInstance.ephemeral() as instance:
        assert last_write(instance, stats, "2026-03-02") is None
        before = time.time()
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=stats, partition="2026-03-02"))
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=stats, partition="2026-03-03"))
        written = last_write(instance, stats, "2026-03-02")
        assert written is not None and before <= written <= time.time()
        assert last_write(instance, stats, "2026-03-01") is None


def test_a_started_run_of_the_sensors_job_counts_as_the_days_last_write_and_a_queued_one_as_waiting():
    """Dagster records no asset selection for a run of the whole days job: the job's name says what it writes."""
    stats = dg.AssetKey(["iceberg", "default", "supplier_stats"])
    with dg.DagsterInstance.ephemeral() as instance:
        for day, event in (("2026-03-02", DagsterEventType.RUN_START), ("2026-03-03", DagsterEventType.RUN_STARTING)):
            run = instance.add_run(
                dg.DagsterRun(job_name=SUPPLIER_STATS_DAYS_JOB, tags={"dagster/partition": day}, asset_selection=None)
            )
            instance.run_storage.handle_run_event(
                run.run_id, DagsterEvent(event_type_value=event.value, job_name=SUPPLIER_STATS_DAYS_JOB)
            )
        other = instance.add_run(dg.DagsterRun(job_name="another_job", tags={"dagster/partition": "2026-03-04"}))
        instance.run_storage.handle_run_event(
            other.run_id, DagsterEvent(event_type_value=DagsterEventType.RUN_STARTING.value, job_name="another_job")
        )
        started = instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": "2026-03-02"}))[0].start_time
        assert started is not None and last_write(instance, stats, "2026-03-02") == started
        assert queued_days(instance, stats, ["2026-03-02", "2026-03-03", "2026-03-04"]) == {"2026-03-03"}
