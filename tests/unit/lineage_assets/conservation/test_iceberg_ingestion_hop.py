"""The iceberg-ingestion hop's pure parts: snapshot classification from hand-written summaries, the ancestry walk,
history resets, the dead-letter tally, the stable cut and the balance arithmetic."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra.settings import StackSettings
from lineage_assets.conservation.balance import HopBalance, OtherWriter, StoreUnavailable
from lineage_assets.conservation.copy_dead_letters import DeadLetters
from lineage_assets.conservation.foreign_records import ForeignRecords
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.iceberg_figures import Figures, assemble
from lineage_assets.conservation.iceberg_ingestion_hop import Look, settled, take_cut
from lineage_assets.conservation.iceberg_snapshots import (
    SnapshotFact,
    ancestry,
    classify,
    history_reset,
    net_rows,
    other_writer,
    rows_held,
)
from lineage_assets.conservation.stores import Stores
from lineage_assets.lineage.identity import Pipeline

FLINK_APPEND = {
    "flink.operator-id": "6f85de67ac6f479e3bcaba1d4678595a",
    "flink.job-id": "3c9eb21951c54916a743c0eeaf345972",
    "flink.max-committed-checkpoint-id": "4",
    "added-data-files": "1",
    "added-records": "80",
    "total-records": "200",
    "total-position-deletes": "0",
    "total-equality-deletes": "0",
    "engine-name": "flink",
}
PYICEBERG_OVERWRITE = {  # a delete of 10 rows that rewrote a file of 120
    "added-data-files": "1",
    "deleted-data-files": "1",
    "added-records": "110",
    "deleted-records": "120",
    "total-records": "190",
    "total-position-deletes": "0",
    "total-equality-deletes": "0",
}
SPARK_REWRITE = {
    "added-records": "190",
    "deleted-records": "190",
    "total-records": "190",
    "engine-name": "spark",
}
OUT = "s3://warehouse/default/orders"
T0 = 1_800_000_000_500  # 2027-01-15T08:00:00.500Z


def fact(sid: int, parent: int | None, op: str, summary: dict[str, str], ts: int = T0) -> SnapshotFact:
    return classify(sid, parent, ts, op, summary)


def test_net_rows_counts_records_and_position_deletes():
    assert net_rows(FLINK_APPEND) == 80
    assert net_rows(PYICEBERG_OVERWRITE) == -10
    assert net_rows(SPARK_REWRITE) == 0
    assert net_rows({"added-position-deletes": "3"}) == -3  # a merge-on-read delete of 3 rows
    # a compaction applying those 3 position deletes: 100 records in, 97 out, the delete file dropped
    assert net_rows({"added-records": "97", "deleted-records": "100", "removed-position-deletes": "3"}) == 0
    assert net_rows({}) == 0


def test_rows_held_is_total_less_position_deletes_and_unknown_with_equality_deletes():
    assert rows_held(FLINK_APPEND) == (200, "")
    assert rows_held({"total-records": "200", "total-position-deletes": "7"}) == (193, "")
    held, why = rows_held({"total-records": "200", "total-equality-deletes": "2"})
    assert held is None and "2 equality deletes" in why and "rewrite_data_files" in why
    held, why = rows_held({"added-records": "5"})
    assert held is None and "no total-records" in why


def test_classify_tells_the_job_from_other_writers():
    flink = fact(2, 1, "append", FLINK_APPEND)
    assert flink.by_flink and flink.checkpoint == 4 and flink.net == 80 and flink.engine == "flink"
    only_operator = fact(3, 2, "append", {"flink.operator-id": "x", "added-records": "1"})
    assert only_operator.by_flink and only_operator.flink_job_id == "unknown"
    other = fact(4, 3, "overwrite", PYICEBERG_OVERWRITE)
    assert not other.by_flink and other.checkpoint is None and other.net == -10
    assert other.describe() == "snapshot 4 (overwrite, no engine named, at 2027-01-15T08:00:00.500+00:00)"
    assert SnapshotFact.from_json(other.to_json()) == other


def test_other_writer_names_foreign_changes_but_not_the_job_or_compactions():
    assert other_writer(OUT, fact(2, 1, "append", FLINK_APPEND)) is None
    assert other_writer(OUT, fact(5, 4, "replace", SPARK_REWRITE)) is None
    assert other_writer(OUT, fact(6, 5, "append", {"engine-name": "pyiceberg"})) is None  # no rows changed
    deleted = other_writer(OUT, fact(4, 3, "overwrite", PYICEBERG_OVERWRITE))
    assert deleted == OtherWriter(
        OUT, "snapshot 4 (overwrite, no engine named, at 2027-01-15T08:00:00.500+00:00)", -10, "snapshot:4"
    )
    # an overwrite that replaced 5 rows by 5 others kept the count but changed the data: named with 0
    swapped = other_writer(OUT, fact(7, 6, "overwrite", {"added-records": "5", "deleted-records": "5"}))
    assert swapped is not None and swapped.rows == 0
    appended = other_writer(OUT, fact(8, 7, "append", {"added-records": "10", "engine-name": "spark"}))
    assert appended is not None and appended.rows == 10 and "(append, spark, at" in appended.what


def test_ancestry_walks_parents_newest_first_and_says_where_it_breaks():
    facts = {
        1: fact(1, None, "append", FLINK_APPEND),
        2: fact(2, 1, "append", FLINK_APPEND),
        3: fact(3, 2, "overwrite", PYICEBERG_OVERWRITE),
        9: fact(9, 8, "append", FLINK_APPEND),  # 8 expired before it was classified
    }
    chain, broken = ancestry(3, facts)
    assert [f.snapshot_id for f in chain] == [3, 2, 1] and broken is None
    chain, broken = ancestry(9, facts)
    assert [f.snapshot_id for f in chain] == [9] and broken == 8
    assert ancestry(None, facts) == ([], None)


def test_history_reset_counts_the_abandoned_snapshots():
    facts = {
        1: fact(1, None, "append", {"added-records": "100", "flink.job-id": "j"}),
        2: fact(2, 1, "append", {"added-records": "30", "flink.job-id": "j"}),
        3: fact(3, 2, "overwrite", {"added-records": "0", "deleted-records": "5"}),
        4: fact(4, 1, "append", {"added-records": "7", "flink.job-id": "j"}),  # after a rollback to 1
    }
    new_chain, _ = ancestry(4, facts)
    reset = history_reset(3, new_chain, facts, T0)
    assert reset is not None
    assert (reset.old_head, reset.new_head, reset.common, reset.rows) == (3, 4, 1, -25)  # 30 - 5 gone
    assert "history reset: snapshot 3 is no longer an ancestor of current snapshot 4" in reset.describe()
    assert history_reset(1, new_chain, facts, T0) is None  # the old head is an ancestor: no reset
    assert history_reset(None, new_chain, facts, T0) is None


def _look(c: int, head: int, dlq: int) -> Look:
    return Look({0: c}, head, {0: dlq}, {0: c + 5}, table=None)


def test_take_cut_waits_until_two_looks_agree():
    looks = iter(
        [
            (_look(10, 1, 0), True),
            (_look(12, 2, 0), False),  # C moved during the look
            (_look(12, 2, 1), True),  # the DLQ committed after the offsets
            (_look(12, 2, 1), True),
        ]
    )
    slept: list[float] = []
    look, how = take_cut(lambda: next(looks), attempts=6, pause=1.5, sleep=slept.append)
    assert look.key() == _look(12, 2, 1).key() and "stable" in how and "look 4 of at most 6" in how
    assert slept == [1.5, 1.5, 1.5]


def test_take_cut_says_so_when_nothing_held_still():
    counter = iter(range(100))
    look, how = take_cut(lambda: (_look(next(counter), 1, 0), True), attempts=3, pause=1.0, sleep=lambda s: None)
    assert look.committed == {0: 2} and how.startswith("NOT stable")


def _hop():
    return hops(Pipeline.from_settings(StackSettings.from_env()))["iceberg-ingestion"]


def _figures(**kw) -> Figures:
    chain = [
        fact(4, 3, "append", {"added-records": "10", "engine-name": "pyiceberg"}, ts=T0 + 3000),
        fact(3, 2, "overwrite", PYICEBERG_OVERWRITE, ts=T0 + 2000),
        fact(2, 1, "append", {**FLINK_APPEND, "added-records": "80"}, ts=T0 + 1000),
        fact(1, None, "append", {**FLINK_APPEND, "added-records": "120"}),
    ]
    dead = DeadLetters({0: {1, 2, 3}, 1: {70}}, ForeignRecords("orders-dlq-flink"))  # 3 below C, 1 ahead
    base = dict(
        below_end=208,
        below_committed=203,
        head=chain[0],
        held=200,
        held_unknown="",
        chain=chain,
        chain_break=None,
        resets=[],
        dead=dead,
        range={"snapshot": 4},
        cut="stable",
        pending_since=1_795_642_900.0,
        committed={0: 10, 1: 50},
    )
    base.update(kw)
    return Figures(**base)


def test_assemble_balances_and_names_other_writers_oldest_first():
    b = assemble(_hop(), _figures())
    # in 208 = out 200 + dead letters 3 + pending 5
    assert (b.in_, b.out, b.dead_letters, b.pending) == (208, 200, 3, 5)
    assert b.status == "pending" and b.missing == 0 and b.duplicates == 0
    assert [w.rows for w in b.other_writers] == [-10, 10]
    assert b.other_writers[0].what.startswith("snapshot 3 (overwrite")
    assert b.other_writers[0].output == _hop().output.qualified_name
    assert b.pending_since == 1_795_642_900.0
    assert any("the job's snapshots in its history add 200, other writers +0" in n for n in b.notes)
    assert any("1 more are ahead of them" in n for n in b.notes)


def test_assemble_reports_a_deletion_as_missing():
    b = assemble(_hop(), _figures(held=190, below_end=203, below_committed=203))
    assert b.status == "missing" and b.missing == 10 and b.pending == 0 and b.pending_since is None


def test_assemble_names_resets_foreign_dead_letters_and_breaks():
    from lineage_assets.conservation.iceberg_snapshots import HistoryReset

    dead = DeadLetters({0: {1, 2, 3}}, ForeignRecords.of("orders-dlq-flink", [(0, 4), (0, 5)], {}))
    b = assemble(
        _hop(),
        _figures(dead=dead, resets=[HistoryReset(9, 4, 1, -25, T0)], chain_break=1, chain=_figures().chain[:3]),
    )
    table, dlq = _hop().output.qualified_name, _hop().dead_letters.qualified_name
    assert [(w.output, w.rows) for w in b.other_writers] == [(table, -10), (table, 10), (table, -25), (dlq, 2)]
    assert b.other_writers[-1].what == "2 records that are no dead letter of orders, orders-dlq-flink offsets 0:4..5"
    assert (b.other_writers[-1].ref, b.other_writers[-1].position) == ("records:orders-dlq-flink:0@4", "0@5")
    assert b.dead_letters == 5  # 3 dead letters of orders and the 2 foreign records the DLQ holds
    assert any("history before snapshot 1 was expired" in n for n in b.notes)


def test_assemble_is_unknown_when_the_rows_cannot_be_read_from_summaries():
    b = assemble(_hop(), _figures(held=None, held_unknown="it has 2 equality deletes"))
    assert b.status == "unknown" and "2 equality deletes" in b.unknown and b.missing is None


def _stores_with_catalog(catalog) -> Stores:
    iceberg = SimpleNamespace(uri="http://127.0.0.1:1", catalog=catalog)
    return Stores(Pipeline.from_settings(StackSettings()), SimpleNamespace(iceberg=iceberg), Path("unused.sqlite"))


def test_a_catalog_that_does_not_answer_is_store_unavailable_naming_it():
    def refused():
        raise ConnectionError("[Errno 111] Connection refused")

    with pytest.raises(StoreUnavailable) as raised:
        _stores_with_catalog(refused).table("default.orders")
    assert "Iceberg REST catalog at http://127.0.0.1:1 did not answer" in str(raised.value)
    assert "lineage-lab stack up iceberg-catalog" in str(raised.value)


def test_a_table_that_is_not_there_names_the_asset_that_creates_it():
    from pyiceberg.exceptions import NoSuchTableError

    class Empty:
        def load_table(self, name):
            raise NoSuchTableError(name)

    assert _stores_with_catalog(Empty).table("default.orders", missing_ok=True) is None
    with pytest.raises(StoreUnavailable) as raised:
        _stores_with_catalog(Empty).table("default.orders")
    assert "has no table default.orders; materialize asset iceberg/default/orders" in str(raised.value)


def test_take_cut_after_a_first_look_waits_once_then_compares_with_it():
    looks = iter([(_look(12, 2, 1), True)])
    slept: list[float] = []
    look, how = take_cut(lambda: next(looks), attempts=6, pause=1.5, sleep=slept.append, previous=_look(12, 2, 1))
    assert look.key() == _look(12, 2, 1).key() and "look 1 of at most 6" in how
    assert slept == [1.5]


def _one_look(in_: int, out: int, dead: int, pending: int, writers: tuple[OtherWriter, ...] = ()) -> HopBalance:
    return HopBalance("iceberg-ingestion", "kafka/orders", (OUT, "kafka/dlq"), in_, out, dead, pending, {}, writers)


def test_one_look_is_enough_when_nothing_is_in_flight_and_it_balances():
    assert settled(_one_look(100, 97, 3, 0), OUT)
    # records between C and the end: the job may commit any moment, look again
    assert not settled(_one_look(100, 92, 3, 5), OUT)
    # a difference no writer explains: perhaps a look between the snapshot and the offsets commit
    assert not settled(_one_look(100, 90, 3, 0), OUT)
    assert not settled(_one_look(100, 104, 3, 0), OUT)
    # a difference the writers named explain (a delete of 7 rows, a foreign DLQ record counted in the 4): no second
    # look
    deleted = OtherWriter(OUT, "snapshot 9 (delete, pyiceberg)", -7, "snapshot:9")
    foreign = OtherWriter("kafka/dlq", "1 record that is no dead letter", 1)
    assert settled(_one_look(100, 90, 4, 0, (deleted, foreign)), OUT)
    assert not settled(_one_look(100, 90, 4, 0, (foreign,)), OUT)
    assert not settled(_one_look(100, None, 3, 0), OUT)  # type: ignore[arg-type]


def test_assemble_says_what_each_figure_means_and_names_every_change():
    from dataclasses import replace

    from lineage_assets.conservation.iceberg_snapshots import HistoryReset

    dead = DeadLetters({0: {1, 2, 3}}, ForeignRecords.of("orders-dlq-flink", [(0, 4)], {}))
    chain = [*_figures().chain[:3], fact(7, 1, "replace", SPARK_REWRITE)]
    resets = [HistoryReset(9, 4, 1, -25, T0)]
    b = assemble(_hop(), _figures(dead=dead, resets=resets, chain_break=1, chain=chain, notes=("a reader's note",)))
    assert (b.job, b.input, b.outputs, b.range) == (
        "iceberg-ingestion",
        _hop().input.qualified_name,
        _hop().output_names,
        {"snapshot": 4},
    )
    assert b.notes == (
        "cut: stable",
        "in: committed records of orders below its last stable offsets; pending: those at or above the group's "
        "committed offsets (read by the job, not yet committed by a checkpoint)",
        "out: rows of default/orders at snapshot 4 from its summary (total-records less position deletes, no data "
        "read); the job's snapshots in its history add 80, other writers +0",
        "dead letters: records of orders-dlq-flink whose source offset is below the committed offsets (0 more are "
        "ahead of them, counted with pending)",
        "counts of Kafka are remembered as marks and the snapshots as facts, so they hold after retention or "
        "snapshot expiry; a run reads only new records and snapshots",
        "compactions (same rows, other files) not named: snapshots [7]",
        "history before snapshot 1 was expired before it was classified: other writers before it are not named "
        "(their rows are in the total)",
        "a reader's note",
    )
    reset, foreign = b.other_writers[2:]
    assert reset == OtherWriter(
        OUT,
        "history reset: snapshot 9 is no longer an ancestor of current snapshot 4 (a rollback or a replaced branch, "
        "found at 2027-01-15T08:00:00+00:00); its changes since snapshot 1 are gone",
        -25,
        "reset:9->4",
    )
    assert (foreign.rows, foreign.figure) == (1, "dead_letters")
    without = assemble(replace(_hop(), dead_letters=None), _figures(head=None))
    assert without.notes[2].startswith("out: rows of default/orders at snapshot none from its summary")
    assert without.notes[3].startswith("dead letters: records of the DLQ whose source offset")
    assert len(without.notes) == 5


def test_classify_reads_the_summary_figures_and_the_job_id():
    f = classify(5, 4, T0, "overwrite", {**PYICEBERG_OVERWRITE, "flink.job-id": "abc"})
    assert (f.flink_job_id, f.added, f.deleted, f.net, f.checkpoint) == ("abc", 110, 120, -10, None)
    assert classify(5, 4, T0, "append", {"flink.max-committed-checkpoint-id": ""}).checkpoint is None
    assert classify(5, 4, T0, "append", {}).flink_job_id == ""


def test_the_summary_figures_an_empty_text_is_zero_or_unknown():
    assert net_rows({"added-records": "", "deleted-records": "2"}) == -2
    assert rows_held({"total-records": ""}) == (
        None,
        "its summary has no total-records (written by a writer that does not keep totals)",
    )
    assert rows_held({"total-records": "9", "total-equality-deletes": "2"}) == (
        None,
        "it has 2 equality deletes, whose effect on the row count only a data scan shows; compact the table (e.g. "
        "Spark `CALL system.rewrite_data_files` with delete-file-threshold 1) and reconcile again",
    )


def test_ancestry_stops_at_a_cycle():
    facts = {2: fact(2, 1, "append", {}), 1: fact(1, 2, "append", {})}
    chain, broken = ancestry(2, facts)
    assert ([f.snapshot_id for f in chain], broken) == ([2, 1], 2)


def test_a_rewrite_is_a_replace_that_keeps_the_rows():
    from lineage_assets.conservation.iceberg_snapshots import is_rewrite

    assert is_rewrite("replace", 0)
    assert not is_rewrite("replace", -1)
    assert not is_rewrite("replace", 1)
    assert not is_rewrite("overwrite", 0)


def test_a_tally_kept_before_carries_on_and_the_scan_goes_on_from_where_it_stopped(tmp_path):
    from lineage_assets.conservation.count_store import CountStore
    from lineage_assets.conservation.iceberg_ingestion_hop import _dead_letters

    counts = CountStore(tmp_path / "counts.sqlite")
    old = {
        "below": {"0": 4},
        "ahead": {"1": [70]},
        "committed": {"0": 10, "1": 50},
        "foreign_batches": [[0, 2, {"0": [1, 1, 2, 2, 0]}]],
        "tallied": {"0": 9},
    }
    counts.put_facts("iceberg-ingestion/dead-letters", {"orders-dlq-flink": json.dumps(old)})
    started: list[int | None] = []

    class Kafka:
        def scan(self, name, topic, handle, done):
            started.append(counts.scan_position(name, topic, 0))
            body = {"src_topic": "orders", "src_partition": 0, "src_offset": 12}
            handle(SimpleNamespace(partition=lambda: 0, offset=lambda: 9, value=lambda: json.dumps(body).encode()))
            done()
            return {0: 10}

    stores = SimpleNamespace(counts=counts, kafka=Kafka())
    dead = _dead_letters(stores, _hop(), [0, 1, 2])  # type: ignore[arg-type]
    assert started == [9]  # the tally's own place in the DLQ
    assert (dead.carried, dead.sources, dead.scanned) == ({0: 4}, {0: {12}, 1: {70}, 2: set()}, {0: 10})
    assert [(b.ref, b.records) for b in dead.foreign.batches] == [("records:orders-dlq-flink:0@2", 1)]
    assert (dead.below({0: 13, 1: 50}), dead.ahead({0: 13, 1: 50})) == (5, 1)
