"""Accepting and revoking other writers' changes on every kind of hop, with hand-written figures: each reader's
balance after the acceptance, after its revocation, and after later records of an accepted Kafka writer arrive."""

from types import SimpleNamespace

import pytest

from infra.settings import StackSettings
from lineage_assets.conservation import acceptances
from lineage_assets.conservation import reconcile as rec
from lineage_assets.conservation.acceptances import AcceptanceError
from lineage_assets.conservation.balance import HopBalance, OtherWriter
from lineage_assets.conservation.copy_dead_letters import DeadLetters
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.foreign_records import ForeignRecords
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.iceberg_figures import Figures, assemble
from lineage_assets.conservation.iceberg_snapshots import classify
from lineage_assets.conservation.source_tally import RecordInfo, Settled, Tally, counted
from lineage_assets.conservation.spark_day_figures import DayWrite, day_figures
from lineage_assets.conservation.spark_day_figures import assemble as spark_assemble
from lineage_assets.conservation.window_book import OutputRecord, WindowBook
from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB, Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())
HOPS = hops(PIPELINE)
AT = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.fixture
def counts(tmp_path) -> CountStore:
    return CountStore(tmp_path / "counts.sqlite")


def judged(b: HopBalance, counts: CountStore) -> HopBalance:
    """What reconcile reports: the reader's balance with the hop's acceptances applied."""
    return b.with_accepted(acceptances.covered(counts, b.job))


# --- orders-source: Debezium's records plus a producer's records straight into orders -------------------------


def orders_source(tally: Tally, counts: CountStore) -> HopBalance:
    """orders-source's figures: 10 rows in the table, 10 Debezium records at the cut, nothing pending."""
    settled = Settled(10, 0, 0, None, (), 0, {}, {})
    return judged(counted(HOPS["orders-source"], 10, settled, tally), counts)


def foreign(tally: Tally, counts: CountStore, *at: tuple[int, int]) -> None:
    tally.accepted = frozenset(acceptances.covered(counts, "orders-source"))
    for p, o in at:
        tally.add(p, o, b"bench", RecordInfo(False), reference_xid=2000, evidence=True)


def test_orders_source_counts_a_producers_records_once_accept_revoke_and_later_records(counts):
    tally = Tally(frontier=1900)
    foreign(tally, counts, (0, 20), (0, 21), (1, 7))
    b = orders_source(tally, counts)
    assert (b.in_, b.out, b.status, b.duplicates) == (10, 13, "duplicates", 3)
    (w,) = b.other_writers
    assert (w.ref, w.position, w.rows) == ("records:orders:0@20", "0@21,1@7", 3)

    acceptances.record(counts, "orders-source", [w], by="ann", at=AT)
    b = orders_source(tally, counts)
    assert (b.out, b.status, b.other_writers, [a.ref for a in b.accepted]) == (
        10,
        "balanced",
        (),
        ["records:orders:0@20"],
    )

    foreign(tally, counts, (0, 30), (2, 4))  # the producer goes on: named again, under its next first record
    b = orders_source(tally, counts)
    assert (b.out, b.status, b.duplicates) == (12, "duplicates", 2)
    assert [(w.ref, w.position, w.rows) for w in b.other_writers] == [("records:orders:0@30", "0@30,2@4", 2)]
    assert [a.ref for a in b.accepted] == ["records:orders:0@20"]

    acceptances.revoke(counts, "orders-source", ["records:orders:0@20"])
    b = orders_source(tally, counts)
    assert (b.out, b.status, b.duplicates, b.accepted) == (15, "duplicates", 5, ())
    assert [w.ref for w in b.other_writers] == ["records:orders:0@20", "records:orders:0@30"]


def test_orders_source_refs_survive_the_tally_json_and_a_legacy_tally_keeps_its_total():
    tally = Tally(frontier=1900)
    tally.add(0, 20, b"x", RecordInfo(False), reference_xid=2000, evidence=True)
    again = Tally.from_facts(tally.to_facts())
    assert again.foreign == tally.foreign
    # remembered before batches: 7 foreign records, of which the capped ranges still name 5
    legacy = {"totals": '{"debezium": 0, "foreign": 7}', "foreign_at": '{"0": [[3, 5]], "1": [[8, 9]]}'}
    (batch,) = Tally.from_facts(legacy).foreign.batches
    assert (batch.ref, batch.position, batch.records) == ("records:orders:0@3", "0@5,1@9", 7)


# --- supplier-stats: records without the job's writer header in the output topic -------------------------------


def supplier_stats(book: WindowBook, counts: CountStore) -> HopBalance:
    """supplier-stats' figures: 5 orders in, the job's windows and the foreign records' claimed counts out."""
    b = HopBalance("supplier-stats", "in", ("out",), 5, book.out, 0, 0, other_writers=book.other_writers("o", "s"))
    return judged(b, counts)


def test_supplier_stats_accept_revoke_and_later_records(counts):
    book = WindowBook()
    t0 = 1_795_642_800_000
    book.add([OutputRecord(0, 0, t0, True, "2026-11-25T21:40:00Z", t0 + 5_000, "Joe", 5)])
    book.add([OutputRecord(1, 3, t0 + 9_000, False, "2026-11-25T21:40:05Z", t0 + 10_000, "Zed", 2)])
    b = supplier_stats(book, counts)
    assert (b.out, b.status, b.duplicates) == (7, "duplicates", 2)
    (w,) = b.other_writers
    assert (w.ref, w.position) == ("records:supplier-stats:1@3", "1@3")

    rec_accepted = acceptances.record(counts, "supplier-stats", [w], by="bob", at=AT)
    assert [(a.ref, a.position, a.by, a.when) for a in rec_accepted] == [
        ("records:supplier-stats:1@3", "1@3", "bob", "2027-01-15T08:00:00+00:00")
    ]
    assert supplier_stats(book, counts).status == "balanced"

    accepted = frozenset(acceptances.covered(counts, "supplier-stats"))
    book.add([OutputRecord(1, 4, t0 + 9_500, False, "2026-11-25T21:40:05Z", t0 + 10_000, "Yan", 3)], accepted)
    b = supplier_stats(book, counts)
    # 10 held (the job's 5, the accepted 2, the new 3), the accepted 2 left out
    assert (b.out, b.duplicates, [w.ref for w in b.other_writers]) == (8, 3, ["records:supplier-stats:1@4"])

    acceptances.revoke(counts, "supplier-stats", ["records:supplier-stats:1@3"])
    b = supplier_stats(book, counts)
    assert (b.out, b.duplicates, len(b.other_writers)) == (10, 5, 2)
    assert WindowBook.from_json(book.to_json()) == book


# --- iceberg-ingestion: a pyiceberg delete in the table, a foreign record in the DLQ --------------------------


def iceberg(dead: DeadLetters, counts: CountStore) -> HopBalance:
    """100 orders in: 97 rows by the job (10 of them deleted by pyiceberg: 87 held) and 3 dead letters."""
    delete = classify(
        5,
        4,
        1_800_000_000_000,
        "delete",
        {"deleted-data-files": "1", "deleted-records": "10", "total-records": "87", "engine-name": "pyiceberg"},
    )
    figures = Figures(100, 100, delete, 87, "", [delete], None, [], dead, {}, committed={0: 10})
    return judged(assemble(HOPS["iceberg-ingestion"], figures), counts)


def test_iceberg_ingestion_accepts_a_snapshot_and_a_dlq_batch_each_from_its_own_figure(counts):
    dead = DeadLetters({0: {1, 2, 3}}, ForeignRecords.of("orders-dlq-flink", [(0, 40)], {}))
    b = iceberg(dead, counts)
    # 100 - 87 - (3 + 1 foreign) = 9 missing: the 10 deleted less the foreign DLQ record
    assert (b.out, b.dead_letters, b.missing) == (87, 4, 9)
    assert [(w.ref, w.figure, w.rows) for w in b.other_writers] == [
        ("snapshot:5", "out", -10),
        ("records:orders-dlq-flink:0@40", "dead_letters", 1),
    ]
    acceptances.record(counts, "iceberg-ingestion", b.other_writers, by="cy", at=AT)
    b = iceberg(dead, counts)
    assert (b.out, b.dead_letters, b.status, b.other_writers) == (97, 3, "balanced", ())

    # a later foreign record, the reader's batches rebuilt: named again, the snapshot stays accepted
    covered = acceptances.covered(counts, "iceberg-ingestion")
    dead.foreign = ForeignRecords.of("orders-dlq-flink", [(0, 40), (0, 41)], covered)
    b = iceberg(dead, counts)
    assert (b.out, b.dead_letters, b.duplicates) == (97, 4, 1)
    assert [w.ref for w in b.other_writers] == ["records:orders-dlq-flink:0@41"]

    acceptances.revoke(counts, "iceberg-ingestion", ["snapshot:5"])
    b = iceberg(dead, counts)
    # the DLQ holds 3 + 2 foreign, the first foreign one still accepted: 4; 100 - 87 - 4 = 9 missing
    assert (b.out, b.dead_letters, b.missing) == (87, 4, 9)


# --- dagster.supplier_stats: a snapshot by another writer that changed a day ----------------------------------


def spark(counts: CountStore) -> HopBalance:
    write = DayWrite(77, "2026-11-25", 42, 20, 0, 4, 1_800_000_000_000)
    deleter = OtherWriter("s3://warehouse/default/supplier_stats", "snapshot 99 (delete)", -4, "snapshot:99:2026-11-25")
    day = day_figures(write, in_now=20, out=16, in_read=20, others=(deleter,))
    return judged(spark_assemble(HOPS[SPARK_SUPPLIER_STATS_JOB], [day], {}), counts)


def test_spark_days_accept_and_revoke_a_snapshot_of_a_day(counts):
    assert (spark(counts).out, spark(counts).missing) == (16, 4)
    acceptances.record(counts, SPARK_SUPPLIER_STATS_JOB, spark(counts).other_writers, by="di", at=AT)
    assert (spark(counts).out, spark(counts).status) == (20, "balanced")
    acceptances.revoke(counts, SPARK_SUPPLIER_STATS_JOB, ["snapshot:99:2026-11-25"])
    assert (spark(counts).out, spark(counts).missing, spark(counts).accepted) == (16, 4, ())


# --- orders-s3-sink: the archive's writers as its reader names them (objects, holes) --------------------------


def archive(counts: CountStore) -> HopBalance:
    """1000 orders in; 990 lines: a hole of 30 lines (an object deleted), a copied object of 20 lines."""
    copy = OtherWriter("s3://a/topics/orders", "object topics/orders/copy.jsonl (off the layout)", 20, "object:copy")
    hole = OtherWriter(
        "s3://a/topics/orders", "orders[0] 100..129 held by no object", -30, "offsets:orders[0]:100..129"
    )
    return judged(HopBalance("orders-s3-sink", "in", ("out",), 1000, 990, 0, 0, other_writers=(copy, hole)), counts)


def test_archive_accepts_an_object_and_a_hole_and_revokes_one(counts):
    assert (archive(counts).missing, len(archive(counts).other_writers)) == (10, 2)
    acceptances.record(counts, "orders-s3-sink", archive(counts).other_writers[:1], by="eve", at=AT)
    assert (archive(counts).out, archive(counts).missing) == (970, 30)
    acceptances.record(counts, "orders-s3-sink", archive(counts).other_writers, by="eve", at=AT + 1)
    assert (archive(counts).out, archive(counts).status) == (1000, "balanced")
    acceptances.revoke(counts, "orders-s3-sink", ["object:copy"])
    assert (archive(counts).out, archive(counts).duplicates) == (1020, 20)


# --- positions, listing, and what a wrong ref says -------------------------------------------------------------


def test_an_acceptance_does_not_cover_a_writer_grown_past_its_position():
    w = OtherWriter("o", "3 records", 3, "records:t:0@5", "0@7")
    grown = OtherWriter("o", "4 records", 4, "records:t:0@5", "0@8")
    b = HopBalance("j", "i", ("o",), 10, 14, 0, 0, other_writers=(grown,))
    assert b.with_accepted({w.ref: w.position}) is b
    assert b.with_accepted({w.ref: None}).out == 10  # accepted before positions were kept: the ref whole


@pytest.fixture
def stores(counts):
    return SimpleNamespace(pipeline=PIPELINE, counts=counts, deep=False)


def named(monkeypatch, *writers: OtherWriter) -> None:
    balance = HopBalance("iceberg-ingestion", "i", ("o",), 100, 104, 0, 0, other_writers=writers)
    monkeypatch.setattr(rec, "reader_of", lambda hop: lambda hop, stores: balance)


def test_reconcile_accepts_what_it_names_lists_it_and_revokes_it(monkeypatch, stores):
    named(monkeypatch, OtherWriter("o", "snapshot 9 (append)", 4, "snapshot:9"))
    (a,) = rec.accept(stores, "iceberg-ingestion", ["snapshot:9"], by="fay")
    assert (a.ref, a.by) == ("snapshot:9", "fay")
    (listed,) = rec.accepted_of(stores, "iceberg-ingestion")
    assert listed.text().startswith("iceberg-ingestion: snapshot:9, accepted by fay at ")
    (found,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=0)
    assert (found.out, found.status) == (100, "balanced")
    assert [r.ref for r in rec.revoke(stores, "iceberg-ingestion", ["snapshot:9"])] == ["snapshot:9"]
    assert rec.accepted_of(stores, "iceberg-ingestion") == []
    (found,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=0)
    assert (found.out, found.duplicates) == (104, 4)


def test_a_wrong_ref_is_an_error_saying_what_there_is(monkeypatch, stores):
    named(monkeypatch, OtherWriter("o", "snapshot 9 (append)", 4, "snapshot:9"))
    with pytest.raises(AcceptanceError, match=r"\['snapshot:8'\] is not another writer .* it names: \['snapshot:9'\]"):
        rec.accept(stores, "iceberg-ingestion", ["snapshot:8"], by="gus")
    with pytest.raises(AcceptanceError, match=r"\['snapshot:9'\] was never accepted .* its acceptances: none"):
        rec.revoke(stores, "iceberg-ingestion", ["snapshot:9"])
    assert rec.accepted_of(stores, "iceberg-ingestion") == []
