"""Foreign records' bookkeeping: runs of offsets, batches split at an acceptance, one writer per batch."""

from lineage_assets.conservation.balance import OtherWriter
from lineage_assets.conservation.foreign_records import Batch, ForeignRecords, Run, reaches


def test_a_run_keeps_its_first_and_last_offset_whatever_the_order():
    run = Run()
    run.add(7, 2)
    run.add(3, 5)
    run.add(9, 0)
    assert run == Run(records=3, rows=7, first=3, last=9)


def test_the_first_offset_of_an_empty_run_is_the_one_added_even_above_the_unset_value():
    run = Run()
    run.add(0, 1)
    assert (run.first, run.last) == (0, 0)
    other = Run()
    other.add(5, 1)
    assert (other.first, other.last) == (5, 5)


def test_merging_runs_adds_their_counts_and_widens_the_span():
    a = Run(records=2, rows=3, first=10, last=11)
    a.merge(Run(records=1, rows=4, first=4, last=4))
    assert a == Run(records=3, rows=7, first=4, last=11)
    a.merge(Run(records=2, rows=2, first=20, last=30))
    assert a == Run(records=5, rows=9, first=4, last=30)


def test_merging_into_an_empty_run_takes_the_others_span_and_an_empty_other_changes_nothing():
    empty = Run()
    empty.merge(Run(records=1, rows=1, first=8, last=8))
    assert empty == Run(records=1, rows=1, first=8, last=8)
    kept = Run(records=1, rows=2, first=5, last=6)
    kept.merge(Run(records=0, rows=0, first=1, last=99))
    assert kept == Run(records=1, rows=2, first=5, last=6)


def test_spans_name_partitions_in_order_and_leave_empty_runs_out():
    batch = Batch("t", (1, 4), {1: Run(2, 2, 4, 9), 0: Run(1, 1, 3, 3), 2: Run()})
    assert batch.spans() == "0:3..3, 1:4..9"
    assert batch.spans("@") == "0@3..3, 1@4..9"


def test_records_go_into_the_open_batch_until_its_ref_is_accepted():
    foreign = ForeignRecords("orders")
    foreign.add(0, 5, 2, accepted=())
    foreign.add(1, 7, 1, accepted=())
    foreign.add(0, 6, 3, accepted={"records:orders:9@9"})  # another ref accepted: same batch
    assert len(foreign.batches) == 1
    assert foreign.batches[0].start == (0, 5)
    assert foreign.batches[0].runs == {0: Run(2, 5, 5, 6), 1: Run(1, 1, 7, 7)}
    foreign.add(1, 8, 4, accepted={"records:orders:0@5"})  # the open batch accepted: a new one starts
    assert [b.start for b in foreign.batches] == [(0, 5), (1, 8)]
    assert foreign.batches[1].runs == {1: Run(1, 4, 8, 8)}
    assert (foreign.records, foreign.rows) == (4, 10)


def test_one_writer_per_batch_with_records_and_its_figure():
    foreign = ForeignRecords(
        "dlq",
        [
            Batch("dlq", (0, 1), {0: Run(2, 3, 1, 2)}),
            Batch("dlq", (0, 3), {}),
            Batch("dlq", (1, 0), {1: Run(1, 1, 0, 0)}),
        ],
    )
    writers = foreign.writers("kafka://b/dlq", lambda b: f"{b.records} records", figure="dead_letters")
    assert writers == (
        OtherWriter("kafka://b/dlq", "2 records", 3, "records:dlq:0@1", "0@2", "dead_letters"),
        OtherWriter("kafka://b/dlq", "1 records", 1, "records:dlq:1@0", "1@0", "dead_letters"),
    )
    assert foreign.writers("kafka://b/dlq", lambda b: "x")[0].figure == "out"


def test_the_values_records_claim_add_up_in_a_run_a_merge_and_a_batch():
    """Value conservation: what foreign records claim in the summed column (units), written by hand."""
    run = Run()
    run.add(4, 1, 250)
    run.add(5, 2, 100)
    assert run == Run(records=2, rows=3, first=4, last=5, units=350)
    run.merge(Run(records=1, rows=1, first=9, last=9, units=-20))
    assert run.units == 330
    foreign = ForeignRecords("supplier-stats")
    foreign.add(0, 1, 2, accepted=(), units=1_000)
    foreign.add(1, 3, 1, accepted=(), units=5)
    assert (foreign.batches[0].units, foreign.units) == (1_005, 1_005)
    (writer,) = foreign.writers("kafka://b/supplier-stats", lambda b: "x", summed=("total_price",))
    assert writer.claimed == (("total_price", 1_005),)
    assert foreign.writers("kafka://b/supplier-stats", lambda b: "x")[0].claimed == ()


def test_records_kept_one_by_one_make_one_batch_while_nothing_is_accepted():
    (batch,) = ForeignRecords.of("dlq", [(0, 9), (0, 3), (1, 4)], {}).batches
    assert (batch.ref, batch.position, batch.records, batch.rows) == ("records:dlq:0@3", "0@9,1@4", 3, 3)


def test_an_acceptance_closes_its_batch_at_its_position_and_later_records_open_the_next():
    found = ForeignRecords.of("dlq", [(0, 3), (0, 5), (0, 7), (0, 8)], {"records:dlq:0@3": "0@5"})
    assert [(b.ref, b.position, b.records) for b in found.batches] == [
        ("records:dlq:0@3", "0@5", 2),
        ("records:dlq:0@7", "0@8", 2),
    ]


def test_an_acceptance_without_a_position_covers_every_later_record():
    (batch,) = ForeignRecords.of("dlq", [(0, 3), (0, 50)], {"records:dlq:0@3": None}).batches
    assert batch.records == 2


def test_an_acceptance_reaches_only_the_partitions_and_offsets_its_position_names():
    assert reaches("0@5,2@9", 2, 9) and reaches("0@5", 0, 0)
    assert not reaches("0@5,2@9", 0, 6) and not reaches("0@5", 1, 0)
