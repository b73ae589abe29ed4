"""The per-key audit's pure comparisons, on hand-written ranges, tables and objects."""

from __future__ import annotations

import itertools

from lineage_assets.conservation.key_audit_compare import (
    chosen,
    compare_archive,
    compare_counts,
    decimal_prefixes,
    describe_spans,
    examples,
    key_runs,
    offset_spans,
    spans_of,
)
from lineage_assets.conservation.key_audit_reads import RangeRecord, oldest_ms, skips

# --- the range -----------------------------------------------------------------------------------------------------


def test_last_n_below_the_committed_offsets_clipped_to_the_log_start():
    spans = spans_of({"last": 100}, {0: 1000, 1: 50, 2: -1001}, {0: 0, 1: 10, 2: 0})
    assert spans == {0: (900, 1000), 1: (10, 50)}  # partition 2: the group never committed


def test_default_is_the_last_10000():
    assert spans_of({}, {0: 25_000}, {0: 0}) == {0: (15_000, 25_000)}


def test_a_chosen_partition_and_offsets_stop_at_the_committed_offset():
    spans = spans_of({"partition": 1, "from": 40, "to": 500}, {0: 1000, 1: 300}, {0: 0, 1: 0})
    assert spans == {1: (40, 300)}


def test_a_range_entirely_above_the_committed_offset_is_empty():
    assert spans_of({"partition": 0, "from": 400, "to": 500}, {0: 300}, {0: 0}) == {}


# --- Iceberg: ids counted --------------------------------------------------------------------------------------------


def test_ids_found_fewer_times_are_missing_more_times_doubled():
    expected = {"a": 1, "b": 2, "c": 1, "d": 1}  # b: Debezium sent it twice
    found = {"a": 1, "b": 1, "d": 3, "z": 5}  # z: not an id of the range, not judged
    missing, doubled = compare_counts(expected, found)
    assert missing == {"b": 1, "c": 1}
    assert doubled == {"d": 2}


def test_a_loss_hidden_behind_a_duplicate_of_the_same_size():
    # the counts balance (3 expected rows, 3 held), the keys do not
    missing, doubled = compare_counts({"a": 1, "b": 1, "c": 1}, {"a": 2, "b": 1})
    assert missing == {"c": 1} and doubled == {"a": 1}


# --- the archive: lines placed on offsets ------------------------------------------------------------------------


def test_a_tiling_of_objects_holds_every_offset_once():
    records = {o: f"id{o}" for o in range(10, 20)}
    objects = {
        "k10": (10, [f"id{o}" for o in range(10, 15)]),
        "k15": (15, [f"id{o}" for o in range(15, 20)]),
    }
    found = compare_archive((10, 20), records, objects)
    assert (found.missing, found.doubled, found.mismatched, found.held, found.beyond) == ([], {}, [], 10, 0)


def test_dead_letters_and_markers_are_skipped_by_the_lines():
    # offsets 12 (dead-lettered) and 13 (a transaction marker) hold no record the sink writes
    records = {10: "a", 11: "b", 14: "c", 15: "d"}
    found = compare_archive((10, 16), records, {"k10": (10, ["a", "b", "c", "d"])})
    assert (found.missing, found.doubled, found.mismatched, found.held) == ([], {}, [], 4)


def test_a_deleted_object_leaves_its_offsets_missing():
    records = {o: f"id{o}" for o in range(0, 9)}
    objects = {"k0": (0, ["id0", "id1", "id2"]), "k6": (6, ["id6", "id7", "id8"])}  # k3 deleted
    found = compare_archive((0, 9), records, objects)
    assert found.missing == [3, 4, 5]
    assert offset_spans(found.missing) == [(3, 5)]


def test_a_copy_one_offset_later_doubles_and_mismatches_every_line():
    records = {o: f"id{o}" for o in range(0, 6)}
    objects = {
        "k0": (0, ["id0", "id1", "id2"]),
        "k3": (3, ["id3", "id4", "id5"]),
        "k1copy": (1, ["id0", "id1", "id2"]),  # the object at 0 copied under start offset 1
    }
    found = compare_archive((0, 6), records, objects)
    assert found.missing == []
    assert found.doubled == {1: ["k0", "k1copy"], 2: ["k0", "k1copy"], 3: ["k1copy", "k3"]}
    assert found.mismatched == [
        (1, "k1copy", 1, "id0", "id1"),
        (2, "k1copy", 2, "id1", "id2"),
        (3, "k1copy", 3, "id2", "id3"),
    ]


def test_a_copy_under_the_same_start_doubles_without_mismatch():
    records = {o: f"id{o}" for o in range(0, 3)}
    objects = {"k0": (0, ["id0", "id1", "id2"]), "k0-again": (0, ["id0", "id1", "id2"])}
    found = compare_archive((0, 3), records, objects)
    assert found.doubled == {0: ["k0", "k0-again"], 1: ["k0", "k0-again"], 2: ["k0", "k0-again"]}
    assert found.mismatched == [] and found.missing == []


def test_only_the_span_is_judged_lines_around_it_are_placed_not_counted():
    # the object holding the span's first records starts before it; the last one runs past the records read
    records = {o: f"id{o}" for o in range(95, 105)}
    objects = {"k95": (95, [f"id{o}" for o in range(95, 101)]), "k101": (101, ["id101", "id102", "id103", "id104"])}
    found = compare_archive((100, 103), records, objects)
    assert (found.missing, found.doubled, found.mismatched, found.held) == ([], {}, [], 3)
    assert found.beyond == 2  # id103, id104: past the span


def test_lines_past_the_records_read_are_beyond():
    found = compare_archive((0, 2), {0: "a", 1: "b"}, {"k0": (0, ["a", "b", "c", "d"])})
    assert found.beyond == 2 and found.held == 2


def test_a_record_that_did_not_decode_is_placed_but_not_compared():
    found = compare_archive((0, 3), {0: "a", 1: None, 2: "c"}, {"k0": (0, ["a", "whatever", "c"])})
    assert found.mismatched == [] and found.held == 3


# --- listing prefixes ------------------------------------------------------------------------------------------------


def test_decimal_prefixes_are_exactly_the_range():
    prefixes = decimal_prefixes(1_322_883, 1_332_883)
    pad = "0" * 13
    covered = set()
    for prefix in prefixes:
        assert len(prefix) <= 20 and prefix.startswith(pad)
        free = 20 - len(prefix)
        low = int(prefix) * 10**free
        covered.add((low, low + 10**free))
    # the pieces tile [lo, hi) without overlap
    pieces = sorted(covered)
    assert pieces[0][0] == 1_322_883 and pieces[-1][1] == 1_332_883
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    assert len(prefixes) <= 2 * 9 * 7


def test_decimal_prefixes_small_cases():
    assert decimal_prefixes(0, 10, width=3) == ["00"]
    assert decimal_prefixes(5, 12, width=3) == ["005", "006", "007", "008", "009", "010", "011"]
    assert decimal_prefixes(100, 300, width=3) == ["1", "2"]
    assert decimal_prefixes(7, 7, width=3) == []


def test_aborted_records_the_sink_read_take_a_line_but_are_not_judged():
    # offsets 2 and 3: an aborted transaction; Connect's consumer (read_uncommitted) wrote lines for them
    records = {0: "a", 1: "b", 2: "x", 3: "y", 5: "c"}  # 4: the abort marker
    found = compare_archive((0, 6), records, {"k0": (0, ["a", "b", "x", "y", "c"])}, aborted={2, 3})
    assert (found.missing, found.doubled, found.mismatched, found.held, found.aborted) == ([], {}, [], 3, 2)


def test_without_the_aborted_records_the_lines_would_be_shifted():
    # the same object judged against the committed records alone: line 3 lands on offset 5, lines 4-5 beyond
    found = compare_archive((0, 6), {0: "a", 1: "b", 5: "c"}, {"k0": (0, ["a", "b", "x", "y", "c"])})
    assert found.mismatched == [(5, "k0", 3, "x", "c")] and found.beyond == 2


def test_doubled_offsets_are_named_as_runs_of_the_same_objects():
    by_offset = {1: ["k0", "c1"], 2: ["k0", "c1"], 3: ["c1", "k3"], 5: ["c1", "k3"]}
    assert key_runs(by_offset) == [(1, 2, ["k0", "c1"]), (3, 3, ["c1", "k3"]), (5, 5, ["c1", "k3"])]


def test_a_partition_never_committed_is_skipped_and_the_next_one_audited():
    assert spans_of({}, {0: -1001, 1: 50}, {0: 0, 1: 0}) == {1: (0, 50)}


def test_the_log_start_of_a_partition_not_named_is_zero():
    assert spans_of({"from": 0}, {0: 5}, {}) == {0: (0, 5)}


def test_to_alone_ends_every_partition_there_and_an_empty_range_is_no_span():
    assert spans_of({"to": 3}, {0: 10, 1: 2}, {0: 0, 1: 0}) == {0: (0, 3), 1: (0, 2)}
    assert spans_of({"from": 5, "to": 5}, {0: 10}, {0: 0}) == {}


def test_an_id_expected_no_times_and_absent_is_neither_missing_nor_doubled():
    assert compare_counts({"a": 0}, {}) == ({}, {})


def test_decimal_prefixes_of_offsets_past_float_precision():
    lo = 10**17 + 1  # above 2**53: a float would round it
    assert decimal_prefixes(lo, lo + 2) == ["00100000000000000001", "00100000000000000002"]


def test_a_run_of_three_keeps_its_first_offset():
    assert key_runs({1: ["k"], 2: ["k"], 3: ["k"]}) == [(1, 3, ["k"])]


def test_the_spans_and_the_range_read_in_words():
    assert describe_spans("orders", {1: (5, 10), 0: (0, 3)}) == "orders[0]@0..2 orders[1]@5..9"
    assert describe_spans("orders", {}) == "no records"
    assert chosen({"partition": 1}) == "the chosen offsets, clipped to the log start and"
    assert chosen({"from": 1}) == chosen({"to": 1}) == "the chosen offsets, clipped to the log start and"
    assert chosen({}) == "the last 10000 offsets of each partition"
    assert chosen({"last": 50}) == "the last 50 offsets of each partition"
    assert chosen({"last": None}) == "the last 10000 offsets of each partition"


def test_examples_show_five_and_say_when_there_are_more():
    assert examples([]) == ""
    assert examples(["a", "b"]) == " (a, b)"
    assert examples(["a", "b", "c", "d", "e"]) == " (a, b, c, d, e)"
    assert examples(["a", "b", "c", "d", "e", "f"]) == " (a, b, c, d, e)"  # more only when the total says so
    assert examples(["a", "b"], total=9) == " (a, b ...)"
    assert examples(["a", "b"], total=2) == " (a, b)"


def test_the_oldest_timestamp_leaves_unstamped_records_out():
    def rr(ts: int) -> RangeRecord:
        return RangeRecord(0, "x", False, ts)

    assert oldest_ms({0: [rr(0), rr(5)], 1: [rr(3)]}) == 3
    assert oldest_ms({0: [rr(1)]}) == 1
    assert oldest_ms({}) == 0


def test_a_range_skips_offsets_when_fewer_records_than_offsets_came():
    rows = [RangeRecord(o, "x", False, 1) for o in (10, 11, 12)]
    assert not skips(rows, 10, 13)
    assert skips(rows, 10, 14)
