"""When a supplier_stats run may read only what was appended since the day's last write, and which write it adds
to. Snapshots and summaries are written by hand."""

from __future__ import annotations

import pytest

from lineage_assets.spark.increment import FULL, INCREMENTAL, DayBase, Decision, choose_mode, day_base
from lineage_assets.spark.new_orders_sensor import SnapshotInfo

DAY, FIELD = "2026-03-02", "bid_time_day"


def snap(sid: int, parent: int | None, operation: str = "append", days: tuple[str, ...] = (DAY,)) -> SnapshotInfo:
    summary = {"partition-summaries-included": "true", "changed-partition-count": str(len(days))}
    summary |= {f"partitions.{FIELD}={d}": "added-records=1" for d in days}
    return SnapshotInfo(sid, parent, summary, operation=operation)


BASE = DayBase(snapshot_id=900, input_snapshot_id=10)


def test_appends_only_since_the_base_read_incrementally_after_its_input_snapshot():
    chain = [snap(11, 10), snap(12, 11, days=("2026-03-03",)), snap(13, 12)]
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, chain, 13) == Decision(
        INCREMENTAL, "3 orders snapshot(s) since 10", 10
    )


def test_nothing_new_is_an_incremental_run_that_reads_nothing():
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, [], 10) == Decision(
        INCREMENTAL, "no orders snapshot since 10", 10
    )


def test_a_delete_of_another_day_keeps_the_run_incremental():
    chain = [snap(11, 10), snap(12, 11, "delete", days=("2026-03-01",)), snap(13, 12)]
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, chain, 13).mode == INCREMENTAL


@pytest.mark.parametrize("operation", ["delete", "overwrite", "replace"])
def test_a_delete_overwrite_or_replace_of_the_day_recomputes_it(operation):
    chain = [snap(11, 10), snap(12, 11, operation, days=("2026-03-01", DAY))]
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, chain, 12) == Decision(
        FULL, f"orders snapshot 12 ({operation}) changed {DAY}"
    )


def test_a_delete_whose_summary_names_no_partitions_recomputes_the_day():
    unnamed = SnapshotInfo(12, 11, {"changed-partition-count": "3"}, operation="delete")
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, [snap(11, 10), unnamed], 12).mode == FULL


def test_an_append_whose_summary_names_no_partitions_is_still_read_incrementally():
    unnamed = SnapshotInfo(11, 10, {"changed-partition-count": "500"})
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, [unnamed], 11).mode == INCREMENTAL


def test_a_start_that_is_no_longer_an_ancestor_recomputes_the_day():
    # the chain from 13 ends at a root (10 expired or rolled back): it does not reach the base's input
    decision = choose_mode(DAY, FIELD, INCREMENTAL, BASE, [snap(12, None), snap(13, 12)], 13)
    assert decision == Decision(
        FULL, f"orders snapshot 10, read by the last write of {DAY}, is not an ancestor of 13 (expired or rolled back)"
    )


def test_a_chain_that_does_not_end_at_the_read_point_recomputes_the_day():
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, [snap(11, 10)], 12).mode == FULL


def test_no_base_a_base_without_its_input_or_a_foreign_write_recompute_the_day():
    chain = [snap(11, 10)]
    assert choose_mode(DAY, FIELD, INCREMENTAL, None, chain, 11) == Decision(
        FULL, f"no earlier write of {DAY} by this job"
    )
    assert choose_mode(DAY, FIELD, INCREMENTAL, DayBase(900, None), chain, 11) == Decision(
        FULL, f"the last write of {DAY} (snapshot 900) does not say what it read"
    )
    assert choose_mode(DAY, FIELD, INCREMENTAL, BASE, chain, 11, foreign_write="snapshot 901 (pyiceberg)") == Decision(
        FULL, f"{DAY} was changed since its last write by snapshot 901 (pyiceberg)"
    )


def test_full_is_full_whatever_the_snapshots_and_an_unknown_mode_is_refused():
    assert choose_mode(DAY, FIELD, FULL, BASE, [snap(11, 10)], 11) == Decision(FULL, "the whole day was asked for")
    with pytest.raises(ValueError, match="'fast' is neither"):
        choose_mode(DAY, FIELD, "fast", BASE, [], 10)


class _Summary:
    def __init__(self, operation: str, props: dict[str, str]):
        self.operation = type("Op", (), {"value": operation})()
        self.additional_properties = props


class _Snapshot:
    def __init__(self, sid: int, parent: int | None, operation: str, props: dict[str, str]):
        self.snapshot_id, self.parent_snapshot_id = sid, parent
        self.summary = _Summary(operation, props)


class _Stats:
    """supplier_stats' snapshots, newest last, as pyiceberg's table gives them."""

    def __init__(self, *snapshots: _Snapshot):
        self.metadata = type("M", (), {"snapshots": list(snapshots)})()
        self._current = snapshots[-1] if snapshots else None

    def current_snapshot(self):
        return self._current


def spark_write(sid, parent, day, read_to="10", rows="20", rejected="2"):
    props = {
        "lineage-lab.day": day,
        "lineage-lab.input-snapshot-id": read_to,
        "lineage-lab.input-rows": rows,
        "lineage-lab.rejected-orders": rejected,
    }
    return _Snapshot(sid, parent, "overwrite", props)


def test_the_base_is_the_days_last_spark_write_and_writes_of_other_days_are_passed_over():
    stats = _Stats(spark_write(900, None, DAY), spark_write(901, 900, "2026-03-03", read_to="11"))
    assert day_base(stats, DAY) == (DayBase(900, 10, 20, 2), "")


def test_a_write_without_the_jobs_properties_after_the_base_is_named():
    stats = _Stats(spark_write(900, None, DAY), _Snapshot(901, 900, "append", {}), spark_write(902, 901, "2026-03-03"))
    assert day_base(stats, DAY) == (DayBase(900, 10, 20, 2), "snapshot 901 (append, not written by this job)")


def test_no_write_of_the_day_and_a_base_that_read_nothing():
    assert day_base(_Stats(spark_write(901, None, "2026-03-03")), DAY) == (None, "")
    assert day_base(_Stats(), DAY) == (None, "")
    empty = _Stats(spark_write(900, None, DAY, read_to="none", rows="0", rejected="0"))
    assert day_base(empty, DAY) == (DayBase(900, None, 0, 0), "")
