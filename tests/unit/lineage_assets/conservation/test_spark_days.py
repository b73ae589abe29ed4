"""The Spark hop's per-day arithmetic, from hand-written snapshot summaries and figures."""

import pytest

from infra.settings import StackSettings
from lineage_assets.conservation.balance import OtherWriter
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.spark_day_figures import (
    BrokenChain,
    DayFigures,
    DayWrite,
    assemble,
    count_along,
    day_figures,
    parse_write,
    partition_delta,
    read_chain,
)
from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB, Pipeline
from lineage_assets.spark.day_commit import commit_properties
from lineage_assets.spark.lineage import RunStatistics, add_statistics

DAY = "2026-11-25"
PART = f"bid_time_day={DAY}"


def hop():
    return hops(Pipeline.from_settings(StackSettings()))[SPARK_SUPPLIER_STATS_JOB]


def test_the_commit_properties_read_back_as_the_write():
    props = commit_properties(DAY, 42, input_rows=10, rejected=2, output_rows=5, output_orders=8)
    assert props["lineage-lab.output-orders"] == "8"
    write = parse_write(7, {**props, "spark.app.id": "local-1"}, 1000)
    assert (write.day, write.input_snapshot, write.input_rows, write.rejected, write.output_rows) == (DAY, 42, 10, 2, 5)
    empty = parse_write(8, commit_properties(DAY, None, 0, 0, 0, 0), 1000)
    assert empty.input_snapshot is None
    assert parse_write(9, {"spark.app.id": "local-1", "added-records": "3"}, 1000) is None


def test_partition_delta_from_a_summary():
    flink = {
        "partition-summaries-included": "true",
        "changed-partition-count": "1",
        f"partitions.{PART}": "added-data-files=1,added-records=120,added-files-size=5255",
    }
    assert partition_delta(flink, PART) == 120
    assert partition_delta(flink, "bid_time_day=2026-11-24") == 0, "not listed among the changed partitions"
    delete = {
        "partition-summaries-included": "true",
        f"partitions.{PART}": "added-data-files=1,deleted-data-files=1,added-records=7,deleted-records=9",
    }
    assert partition_delta(delete, PART) == -2
    posdel = {
        "partition-summaries-included": "true",
        f"partitions.{PART}": "added-delete-files=1,added-position-delete-files=1,added-position-deletes=1",
    }
    assert partition_delta(posdel, PART) is None, "delete files: only a read can tell"
    assert partition_delta({"changed-partition-count": "0", "total-records": "200"}, PART) == 0
    assert partition_delta({"total-records": "200"}, PART) == 0, "no file changed"
    assert partition_delta({"added-records": "5", "changed-partition-count": "2"}, PART) is None


def test_count_along_adds_deltas_to_a_remembered_count():
    chain = [
        (5, {"partition-summaries-included": "true", f"partitions.{PART}": "added-records=3"}),
        (4, {"changed-partition-count": "0"}),
        (3, {"partition-summaries-included": "true", f"partitions.{PART}": "added-records=10"}),
        (2, {"added-records": "100", "changed-partition-count": "3"}),
    ]
    based = []

    def base(sid):
        based.append(sid)
        return 100

    assert count_along(chain, PART, {3: 50}.get, base, reaches_start=True) == 53
    assert based == []
    # nothing remembered: the walk reaches snapshot 2, whose summary has no partition figures -> its manifests
    assert count_along(chain, PART, {}.get, base, reaches_start=True) == 113
    assert based == [2]
    # the table's whole history summed from nothing
    chain_from_start = chain[:3]
    assert count_along(chain_from_start, PART, {}.get, base, reaches_start=True) == 13
    # an expired parent: the oldest retained snapshot is counted from its manifests
    assert count_along(chain_from_start, PART, {}.get, base, reaches_start=False) == 103


def write(rejected=1, snapshot=77, read=42):
    props = commit_properties(DAY, read, input_rows=20, rejected=rejected, output_rows=6, output_orders=20 - rejected)
    return parse_write(snapshot, props, 1_000_000)


def test_a_day_balances_when_the_rows_read_are_summarised_or_rejected():
    d = day_figures(write(), in_now=20, out=19, in_read=20)
    assert (d.in_, d.out, d.dead_letters, d.pending, d.difference) == (20, 19, 1, 0, 0)


def test_new_orders_are_pending_and_removed_ones_are_not():
    d = day_figures(write(), in_now=25, out=19, in_read=20, pending_since=123.0)
    assert (d.in_, d.read_rows, d.pending, d.removed, d.difference, d.pending_since) == (25, 20, 5, 0, 0, 123.0)
    d = day_figures(write(), in_now=17, out=19, in_read=20, pending_since=123.0)
    assert (d.in_, d.pending, d.removed, d.difference, d.pending_since) == (20, 0, 3, 0, None)


def test_a_deleted_row_is_missing_and_its_writer_named():
    deleter = OtherWriter("s3://warehouse/default/supplier_stats", "snapshot 99 (delete)", -4)
    d = day_figures(write(), in_now=20, out=15, in_read=20, others=(deleter,))
    assert d.difference == 4
    assert d.as_range()["missing"] == 4 and d.as_range()["supplier_stats snapshot"] == 77


def test_the_hop_sums_its_days_and_names_each_day():
    h = hop()
    a = day_figures(write(), in_now=20, out=19, in_read=20)
    b = DayFigures("2026-11-24", in_=10, out=7, dead_letters=0, pending=0, read_snapshot=1, write_snapshot=2, removed=0)
    balance = assemble(h, [a, b], {"orders snapshot now": 9})
    assert (balance.in_, balance.out, balance.dead_letters, balance.pending) == (30, 26, 1, 0)
    assert balance.status == "missing" and balance.missing == 3
    assert balance.range["days"]["2026-11-24"]["missing"] == 3
    assert any(n.startswith("day 2026-11-24: 3 order(s) missing") for n in balance.notes)


def test_a_day_written_before_the_properties_makes_the_hop_unknown():
    old = DayFigures("2026-11-20", write_snapshot=5, unknown="written before lineage-lab recorded its input")
    balance = assemble(hop(), [day_figures(write(), 20, 19, 20), old], {})
    assert balance.status == "unknown"
    assert "unknown for day 2026-11-20: written before lineage-lab recorded its input" in balance.unknown
    assert balance.range["days"][DAY]["in"] == 20, "the known days' figures stay in range"
    assert assemble(hop(), [], {}).status == "unknown"


def test_pending_since_is_the_oldest_pending_day():
    a = day_figures(write(), in_now=22, out=19, in_read=20, pending_since=200.0)
    b = day_figures(write(snapshot=78), in_now=21, out=19, in_read=20, pending_since=100.0)
    balance = assemble(hop(), [a, b], {})
    assert balance.status == "pending" and balance.pending == 3 and balance.pending_since == 100.0


def test_statistics_go_on_the_complete_that_reads_and_writes():
    orders, stats = ("s3://warehouse", "default/orders"), ("s3://warehouse", "default/supplier_stats")

    def ds(pair, facet_kind=None):
        d = {"namespace": pair[0], "name": pair[1], "facets": {}}
        if facet_kind:
            d[facet_kind] = {"inputStatistics" if "input" in facet_kind else "outputStatistics": {"rowCount": 999}}
        return d

    events = [
        {"eventType": "START", "inputs": [ds(orders)], "outputs": [ds(stats)]},
        {"eventType": "COMPLETE", "inputs": [], "outputs": [ds(stats)]},
        {"eventType": "COMPLETE", "inputs": [ds(orders, "inputFacets")], "outputs": [ds(stats, "outputFacets")]},
    ]
    out = add_statistics(events, RunStatistics(orders, stats, 253, 9596, 8, 1721))
    assert out[0] == events[0] and out[1] == events[1]
    assert out[2]["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 253
    assert out[2]["inputs"][0]["inputFacets"]["inputStatistics"]["size"] == 9596
    assert out[2]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 8
    assert out[2]["outputs"][0]["outputFacets"]["outputStatistics"]["size"] == 1721
    assert (
        "OutputStatisticsOutputDatasetFacet" in out[2]["outputs"][0]["outputFacets"]["outputStatistics"]["_schemaURL"]
    )
    assert events[2]["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 999, "input not changed in place"


def test_a_write_before_modes_were_recorded_reads_as_full_with_its_cumulative_figures():
    write = parse_write(7, commit_properties(DAY, 42, input_rows=10, rejected=2, output_rows=5, output_orders=8), 1)
    assert (write.mode, write.start_snapshot, write.base_snapshot, write.read_rows, write.read_rejected) == (
        "full",
        None,
        None,
        10,
        2,
    )


def link(sid, mode="full", start=None, base=None, read_to=50, read=10, rejected=1) -> DayWrite:
    return DayWrite(sid, DAY, read_to, 0, rejected, 0, 0, mode, start, base, read, 0)


def test_the_chain_runs_back_through_incremental_writes_to_the_full_one():
    full = link(1, read_to=50)
    first = link(2, "incremental", start=50, base=1, read_to=60)
    second = link(3, "incremental", start=60, base=2, read_to=70)
    assert read_chain([link(0), full, first, second]) == ([full, first, second], True)
    assert read_chain([None, full]) == ([full], True), "a foreign write before a full one does not matter"


def test_a_chain_whose_full_write_expired_is_partial():
    alone = link(2, "incremental", start=50, base=1, read_to=60)
    assert read_chain([alone]) == ([alone], False)


@pytest.mark.parametrize(
    "before",
    [
        None,  # another writer's change under the incremental write
        link(9, read_to=50),  # not its base
        link(1, read_to=49),  # its base, but it read up to another orders snapshot than the start
    ],
)
def test_an_incremental_write_that_does_not_follow_the_write_before_it_breaks_the_chain(before):
    with pytest.raises(BrokenChain):
        read_chain([before, link(2, "incremental", start=50, base=1, read_to=60)])


def test_parse_write_reads_every_property_and_defaults_the_rest():
    summary = {
        "lineage-lab.day": DAY,
        "lineage-lab.input-snapshot-id": "42",
        "lineage-lab.input-rows": "10",
        "lineage-lab.rejected-orders": "2",
        "lineage-lab.output-rows": "5",
        "lineage-lab.mode": "incremental",
        "lineage-lab.start-snapshot-id": "40",
        "lineage-lab.base-snapshot-id": "6",
        "lineage-lab.read-rows": "3",
        "lineage-lab.read-rejected": "1",
    }
    assert parse_write(7, summary, 1000) == DayWrite(7, DAY, 42, 10, 2, 5, 1000, "incremental", 40, 6, 3, 1)
    assert parse_write(8, {"lineage-lab.day": DAY}, 2000) == DayWrite(
        8, DAY, None, 0, 0, 0, 2000, "full", None, None, 0, 0
    )


def test_partition_delta_reads_each_figure_by_its_name():
    def delta(text: str) -> int | None:
        return partition_delta({"partition-summaries-included": "true", f"partitions.{PART}": text}, PART)

    assert delta("added-records=4,added-position-deletes=x=0") is None  # a value with "=": split at the first
    assert delta("added-delete-files=1,added-records=3") is None
    assert delta("added-position-deletes=2,added-records=3") is None
    assert delta("added-delete-files=0,added-records=3") == 3
    assert delta("added-delete-files=,added-records=3") == 3
    assert delta("deleted-records=2") == -2
    assert partition_delta({"changed-partition-count": "0", "added-records": "5"}, PART) == 0
    assert partition_delta({"deleted-records": "2"}, PART) is None
    assert partition_delta({"removed-files-size": "1"}, PART) is None


def test_count_along_counts_the_oldest_retained_and_past_the_walk_from_manifests():
    def summary(added: int) -> dict[str, str]:
        return {"partition-summaries-included": "true", f"partitions.{PART}": f"added-records={added}"}

    chain = [(3, summary(1)), (2, summary(2)), (1, summary(4))]
    assert count_along(chain, PART, {}.get, lambda sid: sid * 100, reaches_start=False) == 103  # 100 + 1 + 2
    assert count_along(chain, PART, {}.get, lambda sid: sid * 100, reaches_start=True, max_walk=1) == 201


def test_a_day_names_the_snapshot_read_and_its_other_writers_and_nothing_grown_is_not_pending():
    deleter = OtherWriter("s3://warehouse/default/supplier_stats", "snapshot 99 (delete)", -4)
    d = day_figures(write(), in_now=20, out=19, in_read=20, others=(deleter,), pending_since=5.0)
    assert (d.read_snapshot, d.write_snapshot, d.other_writers, d.pending_since) == (42, 77, (deleter,), None)


def test_the_hop_notes_each_day_removed_missing_or_doubled():
    removed = DayFigures("2026-11-24", in_=10, out=9, dead_letters=0, pending=0, removed=3, read_snapshot=4)
    doubled = DayFigures("2026-11-25", in_=5, out=7, dead_letters=0, pending=0, pending_since=5.0)
    unread = DayFigures("2026-11-26")  # known, no figure read: adds nothing
    writer = OtherWriter("s3://warehouse/default/supplier_stats", "snapshot 99 (delete)", -4)
    written = DayFigures("2026-11-27", in_=1, out=1, dead_letters=0, pending=0, other_writers=(writer,))
    b = assemble(hop(), [removed, doubled, unread, written], {})
    assert (b.job, b.input, b.outputs) == (SPARK_SUPPLIER_STATS_JOB, hop().input.qualified_name, hop().output_names)
    assert (b.in_, b.out, b.dead_letters, b.pending, b.pending_since) == (16, 17, 0, 0, None)
    assert b.other_writers == (writer,)
    assert b.notes == (
        "per day partition of supplier_stats: in = the day's orders in orders now, of which 'orders read' at the "
        "snapshot its latest Spark write read (that write's lineage-lab.input-snapshot-id) and pending = the rest "
        "(not summarised yet); out = sum(total_count) of the day now; dead letters = the write's "
        "lineage-lab.rejected-orders",
        "cut: supplier_stats' snapshot is read first, then orders'; every figure is of a snapshot named in range",
        "day 2026-11-24: 3 order(s) removed from orders since snapshot 4 (the one read): the day's summary still "
        "counts them; re-materialize supplier_stats for that day to follow orders",
        "day 2026-11-24: 1 order(s) missing in supplier_stats",
        "day 2026-11-25: 2 order(s) doubled in supplier_stats",
    )


def test_the_hop_says_why_it_is_unknown():
    assert assemble(hop(), [], {}).unknown == (
        "supplier_stats holds no day written by the Spark job yet: materialize supplier_stats for a day"
    )
    a, b = DayFigures("2026-11-20", unknown="expired"), DayFigures("2026-11-21", unknown="broken")
    assert (
        assemble(hop(), [a, b], {}).unknown == "unknown for day 2026-11-20: expired; unknown for day 2026-11-21: broken"
    )


def test_a_partial_chain_is_oldest_first_too():
    first = link(2, "incremental", start=50, base=1, read_to=60)
    second = link(3, "incremental", start=60, base=2, read_to=70)
    assert read_chain([first, second]) == ([first, second], False)


def test_a_broken_chain_names_the_write():
    with pytest.raises(BrokenChain) as after:
        read_chain([None, link(2, "incremental", start=50, base=1)])
    assert str(after.value) == "supplier_stats snapshot 2 added to the day after another writer's"
    with pytest.raises(BrokenChain) as other:
        read_chain([link(9, read_to=49), link(2, "incremental", start=50, base=1)])
    assert str(other.value) == (
        "supplier_stats snapshot 2 says it added orders after snapshot 50 to supplier_stats snapshot 1, but the "
        "write before it is snapshot 9, which read up to orders snapshot 49"
    )


def test_the_refused_orders_prices_ride_in_the_commit_and_read_back_in_cents():
    from lineage_assets.spark.day_commit import cents_of

    props = commit_properties(DAY, 42, 10, 2, 5, 8, rejected_cents=-1234)
    assert props["lineage-lab.rejected-price"] == "-12.34"
    assert parse_write(7, props, 1000).rejected_cents == -1234
    # a commit that does not say (written before it was recorded, or an increment on such a base): unknown
    assert "lineage-lab.rejected-price" not in commit_properties(DAY, 42, 10, 2, 5, 8)
    assert parse_write(8, commit_properties(DAY, 42, 10, 2, 5, 8), 1000).rejected_cents is None
    assert [cents_of(t) for t in ("0", "7.5", "1.005", "NaN", "x", None)] == [0, 750, None, None, None, None]


def test_the_days_values_add_up_and_a_day_that_differs_is_named():
    from lineage_assets.conservation.spark_day_values import DayValues, Summed, hop_values

    summed = Summed("total_price", "price")
    days = [
        DayValues("2025-01-02", in_=1000, out=900, dead_letters=100, pending=0),
        DayValues("2025-01-01", in_=500, out=399, dead_letters=0, pending=100),
    ]
    found = hop_values(days, summed)
    assert (found.in_, found.out, found.dead_letters, found.pending, found.difference) == (1500, 1299, 100, 100, 1)
    assert found.where == ("day 2025-01-01: its orders' price 4.00 (refused 0.00), its rows' total_price 3.99",)
    unknown = hop_values([*days, DayValues("2025-01-03", unknown="written before")], summed)
    assert unknown.difference is None and unknown.unknown == "day 2025-01-03: written before"
