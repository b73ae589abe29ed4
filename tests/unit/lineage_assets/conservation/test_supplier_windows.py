"""The supplier-stats window bookkeeping with hand-written records: last firing wins, pruning into the closed total,
the writer header, acknowledgement, and which tail orders are pending."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import fastavro
import pytest

from lineage_assets.conservation import avro_values, balance, foreign_records, window_book, window_cut, window_tail
from lineage_assets.conservation.balance import OtherWriter
from lineage_assets.conservation.window_book import OutputRecord, WindowBook
from lineage_assets.conservation.window_tail import TailBook, TailOrder

# 2026-11-25T21:40:00Z and the window bounds after it, written out by hand
T0 = 1795642800000
S0, S1, S2, S3 = "2026-11-25T21:40:00Z", "2026-11-25T21:40:05Z", "2026-11-25T21:40:10Z", "2026-11-25T21:40:15Z"


def job(p: int, off: int, start: str, end_ms: int, supplier: str, count: int, ts: int = T0 + 20_000) -> OutputRecord:
    return OutputRecord(p, off, ts, True, start, end_ms, supplier, count)


def test_time_helpers_match_the_jobs_format() -> None:
    assert window_book.utc_text(T0) == S0
    assert window_book.utc_text(T0 + 4_999) == "2026-11-25T21:40:04Z"  # seconds, cut (not rounded)
    assert window_book.parse_utc(S1) == T0 + 5_000
    assert window_book.window_start(T0 + 7_321) == T0 + 5_000
    assert window_book.window_start(T0 + 5_000) == T0 + 5_000


def test_constants_are_the_jobs() -> None:
    script = (Path(__file__).parents[4] / "flink_jobs" / "supplier_stats_job.py").read_text()

    def const(name: str) -> str:
        return re.search(rf"^{name} = (.+)$", script, re.M).group(1).strip().strip('"')

    assert int(const("WINDOW_MS").replace("_", "")) == window_book.WINDOW_MS
    assert int(const("OUT_OF_ORDERNESS_MS").replace("_", "")) == window_book.OUT_OF_ORDERNESS_MS
    assert int(const("ALLOWED_LATENESS_MS").replace("_", "")) == window_book.ALLOWED_LATENESS_MS
    assert const("WRITER_HEADER") == window_book.WRITER_HEADER
    assert const("WRITER") == window_book.WRITER
    assert "'sink.transactional-id-prefix' = 'supplier-stats'" in script


def test_last_firing_of_a_window_wins() -> None:
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 2), job(0, 1, S0, T0 + 5_000, "Ann", 1)])
    book.add([job(0, 2, S0, T0 + 5_000, "Joe", 3)])  # a late order fired the window again
    assert book.out == 4  # Joe 3 (not 2 + 3), Ann 1
    assert book.positions == {0: 3}
    assert book.newest_end == T0 + 5_000
    assert book.fired_through == T0 + 4_999


def test_last_firing_wins_in_offset_order_within_a_batch() -> None:
    book = WindowBook()
    book.add([job(1, 9, S0, T0 + 5_000, "Joe", 4), job(1, 3, S0, T0 + 5_000, "Joe", 1)])
    assert book.out == 4


def test_pruning_folds_windows_that_can_no_longer_fire() -> None:
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 2), job(2, 0, S0, T0 + 5_000, "Ann", 1)])
    assert book.prune() == 0  # the newest windows: a late order can still fire them
    book.add([job(0, 1, S1, T0 + 10_000, "Joe", 3)])
    # firing S1 took the clock to 21:40:09.999 = S0's last instant 21:40:04.999 + 5 s lateness: S0 was purged
    assert book.prune() == 2
    assert book.closed_count == 3 and book.closed_windows == 2 and book.closed_through_end == T0 + 5_000
    assert list(book.windows) == [f"{S1}|Joe"]
    book.add([job(0, 2, S1, T0 + 10_000, "Joe", 4)])  # S1 fired again: still open, the last count wins
    assert book.prune() == 0 and book.out == 7
    book.add([job(1, 0, S3, T0 + 20_000, "Ann", 5)])
    assert book.prune() == 1
    assert book.closed_count == 7 and list(book.windows) == [f"{S3}|Ann"]
    assert book.out == 12 and book.reopened == 0


def test_a_closed_window_firing_again_is_added_and_noted() -> None:
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 2), job(0, 1, S2, T0 + 15_000, "Joe", 1)])
    book.prune()
    book.add([job(0, 2, S0, T0 + 5_000, "Joe", 1)])  # only a job restarted without its state does this
    assert book.out == 4 and book.reopened == 1


def test_records_without_the_header_before_the_first_headered_one_are_the_jobs() -> None:
    book = WindowBook()
    legacy = OutputRecord(0, 0, T0 + 1_000, False, S0, T0 + 5_000, "Joe", 2)
    book.add([legacy])
    assert book.header_since_ms is None and book.out == 2 and book.legacy_records == 1
    book.add([job(1, 0, S1, T0 + 10_000, "Ann", 3, ts=T0 + 12_000)])
    assert book.header_since_ms == T0 + 12_000
    late_legacy = OutputRecord(0, 1, T0 + 11_000, False, S1, T0 + 10_000, "Joe", 1)  # stamped before the first
    foreign = OutputRecord(2, 7, T0 + 13_000, False, S1, T0 + 10_000, "Eve", 2)
    book.add([late_legacy, foreign])
    assert book.legacy_records == 2
    assert book.job_out == 6 and book.out == 8
    assert book.other_writers("kafka://b/supplier-stats", "supplier-stats") == (
        OtherWriter(
            "kafka://b/supplier-stats",
            "1 records without the job's writer header (lineage-lab-writer: supplier-stats), supplier-stats "
            "offsets 2:7..7",
            2,
            "records:supplier-stats:2@7",
            "2@7",
        ),
    )


def test_foreign_records_are_named_with_their_offsets_and_claimed_rows_then_acknowledged() -> None:
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 2)])
    book.add(
        [
            OutputRecord(0, 5, T0 + 30_000, False, S0, T0 + 5_000, "Joe", 2),  # does not replace the job's window
            OutputRecord(0, 6, T0 + 30_000, False, S1, T0 + 10_000, "Zed", 2),
            OutputRecord(2, 3, T0 + 30_000, False, S1, T0 + 10_000, "Ann", 2),
            OutputRecord(2, 4, T0 + 30_000, False),  # unreadable: claims nothing, still named
        ]
    )
    assert book.job_out == 2 and book.out == 8
    (named,) = book.other_writers("out", "supplier-stats")
    assert named.rows == 6
    assert named.what == (
        "4 records without the job's writer header (lineage-lab-writer: supplier-stats), supplier-stats offsets "
        "0:5..6, 2:3..4"
    )
    with pytest.raises(ValueError, match="partition 2 holds foreign records up to offset 4"):
        book.acknowledge({0: 6, 2: 3})
    moved = book.acknowledge({0: 6, 2: 4})
    assert sorted(moved) == [0, 2]
    assert book.out == 2 and book.other_writers("out", "supplier-stats") == ()
    book.add([OutputRecord(1, 0, T0 + 40_000, False, S2, T0 + 15_000, "Eve", 1)])  # a new one shows again
    assert book.out == 3 and book.other_writers("out", "supplier-stats")[0].rows == 1


def test_the_book_survives_its_json() -> None:
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 2), job(0, 1, S2, T0 + 15_000, "Ann", 1)])
    book.add([OutputRecord(1, 4, T0 + 30_000, False, S1, T0 + 10_000, "Eve", 2)])
    book.prune()
    book.acknowledge()
    again = WindowBook.from_json(book.to_json())
    assert again == book
    assert WindowBook.from_json(None) == WindowBook()


def order(off: int, bid_ms: int | None, supplier: str | None = "Joe", raw: bytes | None = None, ts: int = 0, p=0):
    return TailOrder(p, off, ts or (bid_ms or T0) + 200, raw or f"order-{off}".encode(), supplier, bid_ms)


def letter(off: int, raw: bytes, p: int = 0) -> tuple[int, int, str]:
    return (p, off, window_tail.digest(raw))


def one_run(tail: TailBook, book: WindowBook, committed: dict[int, int], orders=(), letters=(), starts=None):
    """One reconciliation's tail step as ``advance_tail`` does it, with the records handed in (no Kafka): returns
    the ranges it would have decoded."""
    starts = starts or {p: 0 for p in committed}
    ranges, _ = tail.resume(committed, starts, dict(starts))
    tail.take_dead(list(letters))
    for o in orders:
        assert ranges[o.partition][0] <= o.offset < ranges[o.partition][1], "a record the run would not read"
        tail.take_order(o, book, book.fired_through)
    tail.settle(book, book.fired_through, committed, {0: 100})
    return ranges


def test_pending_orders_are_those_of_windows_not_fired_at_the_cut() -> None:
    book = WindowBook()
    book.add([job(0, 0, S1, T0 + 10_000, "Joe", 1)])  # S1|Joe fired: fired_through 21:40:09.999
    tail = TailBook()
    one_run(
        tail,
        book,
        {0: 8},
        [
            order(1, T0 + 3_000),  # S0: ends before fired_through: fired before the cut, not pending
            order(2, T0 + 6_000),  # S1|Joe: has a committed firing
            order(3, T0 + 11_000),  # S2|Joe: pending
            order(4, T0 + 12_000, "Ann"),  # S2|Ann: pending
            order(5, T0 + 16_000, raw=b"late"),  # dead-lettered (matched by its raw value)
            order(6, T0 + 16_000, raw=b"late"),  # the same bytes again: only one dead letter, so pending
            order(7, None, None, raw=b"junk"),  # not an order Python decodes: never pending
        ],
        [letter(0, b"late"), letter(1, b"other")],
    )
    found = tail.pending()
    assert found.orders == 3
    assert found.windows == {T0 + 15_000: 2, T0 + 20_000: 1}
    assert found.since_ms == T0 + 11_200
    assert [c.offset for c in tail.candidates] == [3, 4, 6]
    assert tail.dead == {window_tail.digest(b"other"): [(0, 1)]}  # kept until the tail start passes it
    assert tail.positions == {0: 8}


def test_nothing_fired_yet_makes_every_undelivered_order_pending() -> None:
    tail = TailBook()
    one_run(tail, WindowBook(), {0: 3}, [order(1, T0 + 1), order(2, T0 + 9_000)])
    found = tail.pending()
    assert found.orders == 2 and found.since_ms == T0 + 201


def test_a_second_run_decodes_only_new_orders_and_settles_the_remembered_ones() -> None:
    book = WindowBook()
    book.add([job(0, 0, S1, T0 + 10_000, "Joe", 1)])  # fired_through 21:40:09.999
    tail = TailBook()
    first = one_run(
        tail,
        book,
        {0: 4},
        [
            order(0, T0 + 11_000),  # S2|Joe
            order(1, T0 + 12_000, "Ann"),  # S2|Ann
            order(2, T0 + 16_000, raw=b"bad"),  # S3|Joe: its dead letter is not committed yet
            order(3, T0 + 3_000),  # S0: fired before the cut
        ],
    )
    assert first == {0: (0, 4)}
    assert (tail.pending().orders, tail.pending().windows) == (3, {T0 + 15_000: 2, T0 + 20_000: 1})
    tail = TailBook.from_json(tail.to_json())  # saved and read back between runs

    # meanwhile: S2|Joe fired (the clock reached 21:40:14.999, so S2|Ann, never written, is missing, not pending),
    # the dead letter of offset 2 was committed, and two more orders were
    book.add([job(0, 1, S2, T0 + 15_000, "Joe", 1)])
    second = one_run(
        tail,
        book,
        {0: 6},
        [order(4, T0 + 17_000, "Ann"), order(5, T0 + 21_000)],  # S3|Ann, S4|Joe
        [letter(7, b"bad")],
    )
    assert second == {0: (4, 6)}  # only the new ones
    found = tail.pending()
    assert found.orders == 2
    assert found.windows == {T0 + 20_000: 1, T0 + 25_000: 1}
    assert found.since_ms == T0 + 17_200
    assert [c.offset for c in tail.candidates] == [4, 5]
    assert tail.dead == {} and tail.fired_through == T0 + 14_999


def test_a_dead_letter_committed_before_its_order_is_matched_when_the_order_is() -> None:
    book = WindowBook()
    tail = TailBook()
    one_run(tail, book, {0: 0}, [], [letter(3, b"x")])
    assert tail.dead == {window_tail.digest(b"x"): [(0, 3)]}
    one_run(tail, book, {0: 2}, [order(0, T0 + 1_000, raw=b"x"), order(1, T0 + 1_000)])
    assert tail.pending().orders == 1 and [c.offset for c in tail.candidates] == [1]
    assert tail.dead == {}


def test_the_same_cut_twice_adds_nothing_twice() -> None:
    """A reconciliation's second attempt (or a rerun with nothing new) goes on from the state it left."""
    book = WindowBook()
    tail = TailBook()
    one_run(tail, book, {0: 2, 1: 1}, [order(0, T0 + 1_000), order(1, T0 + 2_000), order(0, T0 + 3_000, p=1)])
    again = one_run(tail, book, {0: 2, 1: 1})
    assert again == {0: (2, 2), 1: (1, 1)}
    assert tail.pending().orders == 3


def test_committed_offsets_going_back_drop_the_orders_past_them_and_read_them_again() -> None:
    book = WindowBook()
    tail = TailBook()
    one_run(tail, book, {0: 10}, [order(7, T0 + 1_000), order(9, T0 + 2_000)])
    assert tail.pending().orders == 2
    ranges, notes = tail.resume({0: 8}, {0: 0}, {0: 0})  # the job restored a checkpoint that committed 8
    assert ranges == {0: (8, 8)}
    assert [c.offset for c in tail.candidates] == [7]
    assert notes == [
        "the group's committed offsets went back (a job restored from an older checkpoint or savepoint): "
        "orders[0] 10 -> 8; orders past them are decoded again when the job commits them again"
    ]
    tail.settle(book, None, {0: 8}, {0: 100})
    assert tail.positions == {0: 8} and tail.pending().orders == 1
    # it commits them again: offset 9 is decoded again, once
    assert one_run(tail, book, {0: 10}, [order(8, T0 + 1_500), order(9, T0 + 2_000)]) == {0: (8, 10)}
    assert [c.offset for c in tail.candidates] == [7, 8, 9]


def test_retention_past_the_position_reads_from_the_log_start_and_says_so() -> None:
    tail = TailBook(positions={0: 5, 1: 5}, candidates=[window_tail.Candidate(0, 4, T0, T0, "Joe", "aa")])
    ranges, notes = tail.resume({0: 12, 1: 12}, {0: 8, 1: 9}, {0: 8, 1: 3})
    assert ranges == {0: (8, 12), 1: (9, 12)}
    assert tail.candidates == []  # deleted before the tail start
    assert notes == ["orders[0]: retention deleted offsets 5..7 before the tail was decoded; read from the log start"]


def test_the_tail_start_moving_on_drops_candidates_before_it() -> None:
    tail = TailBook(
        positions={0: 10},
        candidates=[window_tail.Candidate(0, 3, T0, T0, "Joe", "aa"), window_tail.Candidate(0, 6, T0, T0, "Ann", "bb")],
    )
    ranges, _ = tail.resume({0: 12}, {0: 5}, {0: 0})
    assert ranges == {0: (10, 12)} and [c.offset for c in tail.candidates] == [6]
    ranges, _ = tail.resume({0: 12}, {0: 11}, {0: 0})  # the cold case: nothing remembered below the tail start
    assert ranges == {0: (11, 12)} and tail.candidates == []
    assert TailBook().resume({0: 12}, {0: 7}, {0: 0})[0] == {0: (7, 12)}


def test_unmatched_dead_letters_before_the_tail_start_are_forgotten() -> None:
    tail = TailBook(dlq_positions={0: 20, 1: 4}, dead={"aa": [(0, 3), (0, 15)], "bb": [(0, 9)], "cc": [(1, 2)]})
    ranges = tail.resume_dead({0: 25, 1: 2}, {0: 10, 1: 0})
    assert tail.dead == {"aa": [(0, 15)], "cc": [(1, 2)]}
    assert ranges == {0: (20, 25), 1: (0, 2)}  # partition 1's end went back (recreated): its tail again
    assert TailBook().resume_dead({0: 25}, {0: 18}) == {0: (18, 25)}


def test_an_event_time_known_to_have_fired_stays_known() -> None:
    book = WindowBook()
    tail = TailBook()
    one_run(tail, book, {0: 2}, [order(0, T0 + 1_000), order(1, T0 + 11_000)])
    tail.settle(book, T0 + 9_999, {0: 2}, {0: 0})  # a watermark read before a checkpoint passed S0 and S1
    assert [c.offset for c in tail.candidates] == [1] and tail.fired_through == T0 + 9_999
    tail.settle(book, None, {0: 2}, {0: 0})  # a later run with no such watermark
    assert tail.fired_through == T0 + 9_999 and tail.pending().orders == 1


def test_the_tail_book_survives_its_json() -> None:
    tail = TailBook(
        positions={0: 5, 2: 7},
        candidates=[window_tail.Candidate(2, 6, T0 + 1, T0, "Joe", window_tail.digest(b"a"))],
        dlq_positions={0: 3},
        dead={window_tail.digest(b"b"): [(0, 1), (0, 2)]},
        fired_through=T0 - 1,
    )
    assert TailBook.from_json(tail.to_json()) == tail
    assert TailBook.from_json(None) == TailBook()


def test_tail_start_covers_the_open_windows() -> None:
    assert window_tail.tail_start_ms(None) is None
    # the oldest window that can hold a pending order starts after fired_through - 5 s; then 5 + 5 + 60 s of slack
    assert window_tail.tail_start_ms(T0 + 9_999) == T0 + 9_999 - 75_000


class FakeMessage:
    def __init__(self, value: bytes | None, headers=None, partition: int = 0, offset: int = 0, ts: int = T0) -> None:
        self._value, self._headers, self._p, self._o, self._ts = value, headers, partition, offset, ts

    def value(self):
        return self._value

    def headers(self):
        return self._headers

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def timestamp(self):
        return (1, self._ts)


STATS_SCHEMA = {
    "type": "record",
    "name": "record",
    "fields": [
        {"name": "window_start", "type": "string"},
        {"name": "window_end", "type": "string"},
        {"name": "supplier", "type": "string"},
        {"name": "total_price", "type": "double"},
        {"name": "count", "type": "long"},
    ],
}
ORDER_SCHEMA = {
    "type": "record",
    "name": "Value",
    "fields": [
        {"name": "supplier", "type": "string"},
        {"name": "bid_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


class FakeRegistry:
    url = "http://registry.test"

    def client(self):
        return self

    def get_schema(self, schema_id: int):
        if schema_id == 404:
            err = RuntimeError("not found")
            err.http_status_code = 404
            raise err
        if schema_id == 500:
            raise OSError("connection refused")
        return type("S", (), {"schema_str": json.dumps(STATS_SCHEMA if schema_id == 2 else ORDER_SCHEMA)})()


def wire(schema_id: int, schema: dict, record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + buf.getvalue()


def test_output_records_read_avro_and_json_and_the_header() -> None:
    avro = avro_values.AvroValues(FakeRegistry())
    value = wire(
        2, STATS_SCHEMA, {"window_start": S0, "window_end": S1, "supplier": "Joe", "total_price": 1.5, "count": 3}
    )
    mine = window_book.output_record(FakeMessage(value, [("lineage-lab-writer", b"supplier-stats")], 1, 7), avro)
    assert mine == OutputRecord(1, 7, T0, True, S0, T0 + 5_000, "Joe", 3, 150)  # total_price 1.5: 150 cents
    other = json.dumps({"window_start": S0, "window_end": S1, "supplier": "Eve", "total_price": 2.0, "count": 2})
    theirs = window_book.output_record(FakeMessage(other.encode(), [("lineage-lab-writer", b"someone")], 0, 1), avro)
    assert theirs == OutputRecord(0, 1, T0, False, S0, T0 + 5_000, "Eve", 2, 200)
    assert window_book.output_record(FakeMessage(b"\x00\x00\x00\x01\x94xx", None), avro).window_start is None
    with pytest.raises(balance.StoreUnavailable, match=r"registry\.test"):
        avro.decode(b"\x00\x00\x00\x01\xf4xx")  # id 500: the registry does not answer


def test_tail_orders_and_dead_letters_decode() -> None:
    avro = avro_values.AvroValues(FakeRegistry())
    value = wire(1, ORDER_SCHEMA, {"supplier": "Joe", "bid_time": T0 + 1_234})
    assert window_tail.tail_order(FakeMessage(value, None, 2, 5, T0 + 2_000), avro) == TailOrder(
        2, 5, T0 + 2_000, value, "Joe", T0 + 1_234
    )
    assert window_tail.tail_order(FakeMessage(b"nope", None), avro).supplier is None
    letter = json.dumps({"src_topic": "orders", "raw_value": base64.b64encode(b"\x00abc").decode(), "reason": "x"})
    assert avro_values.dead_raw_value(FakeMessage(letter.encode())) == b"\x00abc"
    assert avro_values.dead_raw_value(FakeMessage(b"not json")) is None


class FakeKafka:
    def offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        return {"orders": {0: (0, 50)}, "supplier-stats": {0: (0, 7)}, "orders-dlq-supplier-stats": {0: (0, 2)}}[topic]

    def committed(self, topic: str, group: str, partitions: list[int]) -> dict[int, int]:
        return {0: 50}


class FakeFlink:
    """A job whose newest checkpoint (7) completed 500 ms before the cut."""

    def checkpoint(self, jid: str) -> window_cut.Checkpoint:
        now = window_cut.now_ms()
        return window_cut.Checkpoint(7, now - 800, now - 500)


def fake_hop():
    name = type("D", (), {})
    hop = type("H", (), {})()
    hop.input, hop.output, hop.dead_letters = name(), name(), name()
    hop.input.name, hop.output.name, hop.dead_letters.name = "orders", "supplier-stats", "orders-dlq-supplier-stats"
    return hop


def test_a_cut_right_after_a_checkpoint_waits_unless_nothing_moved_since_a_quiet_cut() -> None:
    stores = type("S", (), {"kafka": FakeKafka()})()
    slept: list[float] = []
    cut = window_cut.take_cut(fake_hop(), stores, FakeFlink(), "job", "supplier-stats", slept.append)
    assert slept and all(0 < s <= 2.0 for s in slept)  # the checkpoint stays 500 ms old in the fake: it waits
    assert cut.committed == {0: 50} and cut.steady is False
    seen = '{"dead_letters": {"0": 2}, "orders": {"0": 50}, "output": {"0": 7}}'
    assert window_cut.cut_key(cut) == seen
    slept.clear()
    cut = window_cut.take_cut(fake_hop(), stores, FakeFlink(), "job", "supplier-stats", slept.append, quiet=seen)
    assert slept == [] and cut.steady and cut.checkpoint.id == 7
    moved = '{"dead_letters": {"0": 2}, "orders": {"0": 49}, "output": {"0": 7}}'
    window_cut.take_cut(fake_hop(), stores, FakeFlink(), "job", "supplier-stats", slept.append, quiet=moved)
    assert len(slept) == 6  # C moved since the quiet cut: every attempt waits for the checkpoint to settle


def test_spans_text_names_partitions_in_order_and_leaves_empty_ones_out() -> None:
    from lineage_assets.conservation.foreign_records import Run

    assert window_book.spans_text({1: Run(2, 2, 5, 6), 0: Run(1, 1, 3, 3), 2: Run()}) == "0:3..3, 1:5..6"


def test_undecided_until_fired_through_reaches_the_windows_last_instant_or_it_fired() -> None:
    assert window_tail.undecided(T0, "Joe", WindowBook(), T0 + 4_998)
    assert not window_tail.undecided(T0, "Joe", WindowBook(), T0 + 4_999)
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 1)])
    assert not window_tail.undecided(T0, "Joe", book, None)
    assert window_tail.undecided(T0, "Ann", book, None)


def test_tail_start_is_never_below_zero() -> None:
    assert window_tail.tail_start_ms(10) == 0


def test_an_empty_tail_has_nothing_pending() -> None:
    assert TailBook().pending() == window_tail.Pending(0, None, {})


def test_resume_notes_every_partition_whose_offset_went_back_and_drops_candidates_at_c() -> None:
    tail = TailBook(positions={0: 12, 1: 9, 2: 4}, candidates=[window_tail.Candidate(2, 3, T0, T0, "Joe", "aa")])
    ranges, notes = tail.resume({0: 12, 1: 7, 2: 3}, {0: 0, 1: 0, 2: 0}, {0: 0, 1: 0, 2: 0})
    assert ranges == {0: (12, 12), 1: (7, 7), 2: (3, 3)}
    assert notes == [
        "the group's committed offsets went back (a job restored from an older checkpoint or savepoint): "
        "orders[1] 9 -> 7, orders[2] 4 -> 3; orders past them are decoded again when the job commits them again"
    ]
    assert tail.candidates == []  # offset 3 is at C now: decoded again when committed again


def test_resume_from_the_log_start_only_when_retention_passed_the_position() -> None:
    tail = TailBook(positions={0: 8, 1: 5})
    ranges, notes = tail.resume({0: 12, 1: 12}, {0: 8, 1: 8}, {0: 8, 1: 12})
    assert ranges == {0: (8, 12), 1: (8, 12)}
    assert notes == []  # 0: retention reached the position only; 1: the log start is C (nothing to read)


def test_resume_dead_keeps_a_letter_at_the_tail_start_and_a_position_at_the_end() -> None:
    tail = TailBook(dlq_positions={0: 25}, dead={"aa": [(0, 10)]})
    assert tail.resume_dead({0: 25}, {0: 10}) == {0: (25, 25)}
    assert tail.dead == {"aa": [(0, 10)]}


def test_settle_drops_a_candidate_whose_window_fired_since() -> None:
    book = WindowBook()
    tail = TailBook(candidates=[window_tail.Candidate(0, 1, T0, T0 + 10_000, "Joe", "aa")])
    book.add([job(0, 0, S2, T0 + 15_000, "Joe", 1)])
    tail.settle(book, None, {0: 2}, {0: 0})
    assert tail.candidates == []


def test_take_order_judges_the_orders_own_window_and_supplier() -> None:
    book = WindowBook()
    book.add([job(0, 0, S2, T0 + 15_000, "Joe", 1)])  # S2|Joe fired
    tail = TailBook()
    tail.take_order(TailOrder(0, 1, T0, None, None, T0 + 11_000), book, None)  # no supplier: dead-lettered by the job
    tail.take_order(TailOrder(0, 2, T0, None, "Joe", T0 + 11_000), book, None)  # its window fired
    tail.take_order(TailOrder(0, 3, T0, None, "Ann", T0 + 1_000), book, T0 + 4_999)  # fired_through passed it
    tail.take_order(TailOrder(0, 4, T0, None, "Ann", T0 + 11_000), book, None)
    assert tail.candidates == [window_tail.Candidate(0, 4, T0, T0 + 10_000, "Ann", "")]


def test_acknowledging_past_the_reviewed_offset_says_so_and_batches_of_other_partitions_are_taken() -> None:
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 1, ts=T0 + 6_000)])  # the header since: later ones without are foreign
    book.add([OutputRecord(0, 5, T0 + 30_000, False, S0, T0 + 5_000, "Eve", 1)])
    book.add(
        [OutputRecord(1, 2, T0 + 30_000, False, S0, T0 + 5_000, "Eve", 1)],
        accepted=frozenset({"records:supplier-stats:0@5"}),
    )
    with pytest.raises(ValueError) as past:
        book.acknowledge({0: 4})
    assert str(past.value) == (
        "partition 0 holds foreign records up to offset 5, past the 4 acknowledged: review them first"
    )
    moved = book.acknowledge()
    assert sorted(moved) == [0, 1] and book.foreign.batches == []


def test_add_keeps_the_highest_position_the_newest_end_and_counts_unreadable_and_reopened() -> None:
    book = WindowBook()
    book.add([job(0, 5, S1, T0 + 10_000, "Joe", 1)])
    book.add([job(0, 2, S0, T0 + 5_000, "Joe", 1)])
    assert (book.positions, book.newest_end) == ({0: 6}, T0 + 10_000)
    unreadable = OutputRecord(1, 3, T0 + 20_000, True)
    book.add([unreadable, job(1, 4, S2, T0 + 15_000, "Ann", 2)])
    assert book.unreadable == foreign_records.Run(1, 0, 3, 3)
    assert book.windows[f"{S2}|Ann"] == [2, T0 + 15_000, 0]
    book.add([job(2, 0, S3, T0 + 40_000, "Ann", 1, ts=T0 + 45_000)])
    assert book.prune() == 3
    book.add([job(2, 1, S0, T0 + 5_000, "Joe", 1), job(2, 2, S1, T0 + 10_000, "Joe", 1)])
    assert book.reopened == 2


def test_a_record_without_the_header_stamped_at_the_first_headered_one_is_foreign() -> None:
    book = WindowBook()
    book.add([job(0, 0, S0, T0 + 5_000, "Joe", 1, ts=T0 + 6_000)])
    book.add([OutputRecord(0, 1, T0 + 6_000, False, S0, T0 + 5_000, "Eve", 3)])
    assert (book.legacy_records, book.foreign_rows) == (0, 3)


def test_prune_of_an_empty_book_and_the_closed_bound_is_the_latest_end_folded() -> None:
    assert WindowBook().prune() == 0
    book = WindowBook()
    book.add([job(0, 0, S1, T0 + 10_000, "Joe", 1), job(1, 0, S0, T0 + 5_000, "Ann", 1)])
    book.add([job(0, 1, S3, T0 + 30_000, "Joe", 1)])
    assert book.prune() == 2
    assert book.closed_through_end == T0 + 10_000


def test_a_windows_end_and_the_event_time_its_firing_shows() -> None:
    assert window_book.window_end(T0) == T0 + 5_000
    assert window_book.fired_through_of(T0 + 5_000) == T0 + 4_999
    assert window_book.fired_through_of(None) is None
