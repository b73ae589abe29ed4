"""Pure logic of the orders-source reader: who wrote a record, redeliveries, xids, and the cut's arithmetic."""

from lineage_assets.conservation.source_tally import (
    MAX_RANGES,
    PartitionOrder,
    RecordInfo,
    Snapshot,
    Tally,
    TxRows,
    add_offset,
    changed_rows,
    classify,
    describe_ranges,
    lsn_int,
    lsn_text,
    settle,
    widen,
)

DEBEZIUM_OLD = [
    ("__debezium.context.connectorLogicalName", b"orders_source"),
    ("__debezium.context.taskId", b"0"),
]
DEBEZIUM_NEW = [
    *DEBEZIUM_OLD,
    ("__op", b"c"),
    ("__lsn", b"48872528"),
    ("__txId", b"1918"),
    ("__sequence", b'["47295928","48872528"]'),
]


def test_classify_debezium_with_smt_headers():
    assert classify(DEBEZIUM_NEW) == RecordInfo(True, "c", 48872528, 1918, (47295928, 48872528))


def test_classify_debezium_before_smt_headers():
    assert classify(DEBEZIUM_OLD) == RecordInfo(True)


def test_classify_foreign_records():
    assert classify(None) == RecordInfo(False)
    assert classify([("trace", b"x")]) == RecordInfo(False)
    assert classify([("__debezium.context.connectorLogicalName", b"someone_else")]) == RecordInfo(False)


def test_classify_snapshot_sequence_with_null_commit():
    info = classify([("__op", b"r"), ("__lsn", b"100"), ("__sequence", b'[null,"100"]')])
    assert info == RecordInfo(True, "r", 100, None, (0, 100))


def test_lsn_conversions():
    assert lsn_int("0/2D0B4D8") == 0x2D0B4D8
    assert lsn_int("1/0") == 1 << 32
    assert lsn_int(None) is None
    assert lsn_text(0x2D0B4D8) == "0/2D0B4D8"
    assert lsn_text((3 << 32) + 16) == "3/10"


def test_widen_within_and_across_epochs():
    assert widen(1918, 2406) == 1918
    assert widen(2500, 2406) == 2500  # started after the snapshot: still the same epoch
    epoch1 = 1 << 32
    assert widen(4294967200, epoch1 + 5) == 4294967200  # end of epoch 0 seen from the start of epoch 1
    assert widen(3, (1 << 32) - 10) == epoch1 + 3  # start of epoch 1 seen from the end of epoch 0


def test_snapshot_visibility():
    snap = Snapshot.parse("100:110:103,107")
    assert str(snap) == "100:110:103,107"
    assert snap.visible(99)
    assert snap.visible(104)
    assert not snap.visible(103)
    assert not snap.visible(110)
    assert not snap.visible(120)
    assert Snapshot.parse("5:5:") == Snapshot(5, 5)


def test_partition_order_redeliveries():
    order = PartitionOrder()
    assert not order.redelivered((10, 15), "a")
    assert not order.redelivered((20, 12), "b")  # a later transaction with a lower change LSN: commit order
    assert order.redelivered((10, 15), "a")  # re-sent after a restart
    assert order.redelivered((20, 12), "b")  # the last one re-sent
    assert not order.redelivered((20, 12), "c")  # another row of one multi-row WAL record
    assert not order.redelivered((20, 13), "d")
    assert order.key == (20, 13)
    assert order.ids == {"d"}
    assert PartitionOrder.from_json(order.as_json()) == order


def test_offset_ranges_merge_and_are_bounded():
    ranges: list[list[int]] = []
    for o in (5, 6, 7, 9, 12, 13):
        add_offset(ranges, o)
    assert ranges == [[5, 7], [9, 9], [12, 13]]
    assert describe_ranges({"1": [[4, 4]], "0": ranges}) == "orders[0]@5..7,9,12..13 orders[1]@4"
    many: list[list[int]] = []
    for o in range(0, 2 * (MAX_RANGES + 5), 2):
        add_offset(many, o)
    assert len(many) == MAX_RANGES
    assert many[0] == [10, 10]


def test_settle_all_delivered_some_past_the_cut():
    snap = Snapshot(200, 205, frozenset({202}))
    recent = {200: TxRows(3), 201: TxRows(2)}
    delivered = {200: 3, 201: 2, 202: 4, 206: 1}  # 202 running at the cut, 206 started after it
    s = settle(snap, recent, delivered, {}, debezium_total=100, wal=5000, reached=4000)
    assert (s.out, s.beyond, s.pending, s.missing_txids) == (95, 5, 0, ())
    assert s.frontier == 200
    assert s.delivered == {200: 3, 201: 2, 202: 4, 206: 1}


def test_settle_pending_until_debezium_passes_the_first_sighting():
    snap = Snapshot(300, 305)
    recent = {301: TxRows(4, since=1000.0), 303: TxRows(2, since=1010.0)}
    delivered = {301: 1}
    first = settle(snap, recent, delivered, {}, debezium_total=50, wal=9000, reached=8000)
    assert (first.out, first.pending, first.pending_since, first.missing_txids) == (50, 5, 1000.0, ())
    assert first.frontier == 300
    assert first.first_seen == {301: 9000, 303: 9000}
    # later: Debezium read past 9000, still nothing more of 303 and 301: those rows are missing, not pending
    later = settle(Snapshot(400, 400), recent, delivered, first.first_seen, 50, wal=12000, reached=9500)
    assert (later.pending, later.pending_since, later.missing_txids) == (0, None, (301, 303))
    assert later.frontier == 400
    assert later.delivered == {}
    assert later.first_seen == {}


def test_settle_frontier_stays_at_the_oldest_pending_transaction():
    s = settle(Snapshot(500, 510), {490: TxRows(1)}, {}, {}, 10, wal=100, reached=None)
    assert (s.pending, s.frontier, s.first_seen) == (1, 490, {490: 100})


def test_tally_counts_writers_and_redeliveries():
    tally = Tally(frontier=1900)
    new = classify(DEBEZIUM_NEW)
    tally.add(0, 10, b"k1", new, reference_xid=2000, evidence=True)
    tally.add(0, 11, b"x", RecordInfo(False), reference_xid=2000, evidence=True)
    tally.add(0, 12, b"x", RecordInfo(False), reference_xid=2000, evidence=True)
    tally.add(0, 13, b"k1", new, reference_xid=2000, evidence=False)  # re-sent
    tally.add(1, 3, b"k0", classify(DEBEZIUM_OLD), reference_xid=2000, evidence=True)
    tally.add(1, 4, b"k9", RecordInfo(True, "c", 7, 1800, (1, 7)), reference_xid=2000, evidence=True)
    assert (tally.debezium, tally.foreign.records, tally.redelivered) == (4, 2, 1)
    assert tally.ops == {"c": 3, "?": 1}
    assert [(b.ref, b.position) for b in tally.foreign.batches] == [("records:orders:0@11", "0@12")]
    assert tally.redelivered_at == {"0": [[13, 13]]}
    assert tally.delivered == {1918: 2}  # 1800 is below the frontier: settled before
    assert (tally.lsn_max, tally.lsn_late) == (48872528, 48872528)
    again = Tally.from_facts(tally.to_facts())
    assert (again.debezium, again.foreign, again.redelivered, again.delivered) == (4, tally.foreign, 1, {1918: 2})
    assert again.orders["0"].key == (47295928, 48872528)


def test_changed_rows_and_statistics_reset():
    assert changed_rows({"updated": 3, "deleted": 1}, {"updated": 1, "deleted": 1}) == {"updated": 2, "deleted": 0}
    assert changed_rows({"updated": 0, "deleted": 0}, {"updated": 5, "deleted": 0}) == {"deleted": 0}


def test_classify_a_sequence_without_its_lsn_or_not_json_and_an_op_not_utf8():
    assert classify([("__op", b"u"), ("__sequence", b'["5", null]')]).order == (5, 0)
    assert classify([("__op", b"u"), ("__sequence", b"not json")]).order is None
    assert classify([("__op", b"\xff")]).op == "\ufffd"


def test_partitions_are_described_in_number_order():
    assert describe_ranges({"10": [[1, 1]], "9": [[2, 3]], "3": []}) == "orders[9]@2..3 orders[10]@1"


def test_lsn_hex_both_halves():
    assert lsn_int("10/1F") == (16 << 32) + 31
    assert lsn_text(None) is None


def test_settle_a_transaction_delivered_whole_is_done_and_at_the_first_sighting_missing():
    recent = {301: TxRows(2, since=5.0), 303: TxRows(1, since=7.0)}
    s = settle(Snapshot(300, 305), recent, {301: 2}, {}, debezium_total=9, wal=9000, reached=None)
    assert (s.pending, s.pending_since, s.first_seen, s.frontier) == (1, 7.0, {303: 9000}, 300)
    at = settle(Snapshot(300, 305), recent, {301: 2}, {}, debezium_total=9, wal=9000, reached=9000)
    assert (at.pending, at.missing_txids) == (0, (303,))


def test_widen_at_half_the_span():
    half = 1 << 31
    assert widen(half, 0) == half  # exactly half ahead: the same epoch
    assert widen(half - 1, 0) == half - 1
    assert widen(0, half) == 0  # exactly half behind: the same epoch
    assert widen(0, half - 1) == 0
    assert widen(20, (1 << 32) + 10) == (1 << 32) + 20
    assert widen(half + 1, 0) == half + 1 - (1 << 32)
    assert widen(0, half + 1) == 1 << 32


def test_snapshot_xmin_itself_running_is_not_visible():
    assert not Snapshot(100, 110, frozenset({100})).visible(100)


def test_partition_order_a_new_key_is_not_capped_and_ids_at_one_key_are_capped(monkeypatch):
    from lineage_assets.conservation import source_tally

    monkeypatch.setattr(source_tally, "MAX_IDS_AT_KEY", 2)
    order = PartitionOrder(capped=True)
    assert not order.redelivered((1, 1), "a")
    assert (order.ids, order.capped) == ({"a"}, False)
    assert not order.redelivered((1, 1), "b")
    assert (order.ids, order.capped) == ({"a", "b"}, False)
    assert not order.redelivered((1, 1), "c")  # past the cap: not remembered, redelivery left to --deep
    assert (order.ids, order.capped) == ({"a", "b"}, True)


def test_tally_keys_rows_late_lsns_and_the_frontier_itself():
    tally = Tally(frontier=1918)
    tally.add(0, 1, None, RecordInfo(True, "c", 5, 1918, (1, 1)), reference_xid=2000, evidence=False)
    tally.add(0, 2, b"\xff", RecordInfo(True, "c", 3, None, (1, 1)), reference_xid=2000, evidence=False)
    tally.add(0, 3, b"k", RecordInfo(True, "c", None, None, (1, 1)), reference_xid=2000, evidence=True)
    assert (tally.lsn_late, tally.lsn_max, tally.delivered) == (5, None, {1918: 1})
    assert tally.orders["0"].ids == {"", "\ufffd", "k"}
    tally.add(0, 4, b"k", RecordInfo(True, "c", None, None, (1, 1)), reference_xid=2000, evidence=True)
    tally.add(0, 5, b"k", RecordInfo(True, "c", None, None, (1, 1)), reference_xid=2000, evidence=True)
    assert (tally.redelivered, tally.redelivered_at) == (2, {"0": [[4, 5]]})
    tally.add(1, 0, b"x", RecordInfo(False), reference_xid=2000, evidence=True)
    assert (tally.foreign.records, tally.foreign.rows) == (1, 1)


def test_changed_rows_without_a_baseline_are_none_yet():
    assert changed_rows({"updated": 3, "deleted": 0}, {}) == {"updated": 0, "deleted": 0}


def test_counted_out_is_debeziums_records_and_every_other_writers():
    from infra.settings import StackSettings
    from lineage_assets.conservation.hops import hops
    from lineage_assets.conservation.source_tally import Settled, counted
    from lineage_assets.lineage.identity import Pipeline

    hop = hops(Pipeline.from_settings(StackSettings()))["orders-source"]
    tally = Tally()
    tally.add(0, 7, b"x", RecordInfo(False), reference_xid=1, evidence=True)
    settled = Settled(
        out=40, beyond=0, pending=2, pending_since=5.0, missing_txids=(), frontier=1, delivered={}, first_seen={}
    )
    b = counted(hop, 43, settled, tally)
    assert (b.job, b.input, b.outputs) == ("orders-source", hop.input.qualified_name, hop.output_names)
    assert (b.in_, b.out, b.dead_letters, b.pending, b.pending_since) == (43, 41, 0, 2, 5.0)
    (writer,) = b.other_writers
    assert (writer.output, writer.rows, writer.ref) == (hop.output.qualified_name, 1, "records:orders:0@7")
    assert writer.what == "1 records produced by another writer (without Debezium's headers), orders offsets 0:7..7"
