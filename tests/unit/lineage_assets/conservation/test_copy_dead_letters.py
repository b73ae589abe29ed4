"""A copy's dead letters: the sources Connect's headers and the Flink jobs' JSON name, written by hand, and the
figures read against committed offsets chosen by hand."""

from __future__ import annotations

import json
from types import SimpleNamespace

from infra.settings import StackSettings
from lineage_assets.conservation import acceptances
from lineage_assets.conservation.copy_dead_letters import (
    DeadLetters,
    connect_source,
    flink_source,
    foreign_writers,
    named_in,
    of_input,
    read,
)
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.foreign_records import ForeignRecords
from lineage_assets.conservation.hops import hops
from lineage_assets.lineage.identity import Pipeline

HOPS = hops(Pipeline.from_settings(StackSettings()))


class Msg:
    def __init__(self, offset: int, value: bytes | None = None, headers=None, partition: int = 0) -> None:
        self._offset, self._value, self._headers, self._partition = offset, value, headers, partition

    def offset(self) -> int:
        return self._offset

    def partition(self) -> int:
        return self._partition

    def value(self) -> bytes | None:
        return self._value

    def headers(self):
        return self._headers


def connect_letter(offset: int, topic: str = "orders", partition: str | None = "1", at: str | None = "41") -> Msg:
    headers = [("__connect.errors.topic", topic.encode()), ("other", None)]
    headers += [("__connect.errors.partition", partition.encode() if partition is not None else None)]
    headers += [("__connect.errors.offset", at.encode() if at is not None else None)]
    return Msg(offset, b"raw", headers)


def flink_letter(offset: int, src: tuple[str, int, int] = ("orders", 2, 41)) -> Msg:
    body = {"src_topic": src[0], "src_partition": src[1], "src_offset": src[2], "reason": "bad magic byte"}
    return Msg(offset, json.dumps(body).encode())


def test_connects_headers_name_the_source():
    assert connect_source(connect_letter(0)) == ("orders", 1, 41)
    assert connect_source(connect_letter(0, at=None)) == ("orders", None, None)
    assert connect_source(connect_letter(0, partition="x")) == ("orders", None, None)
    assert connect_source(Msg(0, b"v", None)) == (None, None, None)
    undecodable = [("__connect.errors.topic", b"\xffs"), *connect_letter(0).headers()[1:]]
    assert connect_source(Msg(0, b"v", undecodable)) == ("\ufffds", 1, 41)


def test_the_flink_jobs_json_names_the_source():
    assert flink_source(flink_letter(0)) == ("orders", 2, 41)
    for value in (b"not json", None, b"[1, 2]", json.dumps({"src_topic": "orders"}).encode()):
        assert flink_source(Msg(0, value)) == (None, None, None)


def test_a_source_of_another_topic_or_without_a_place_names_no_input_record():
    assert of_input(("orders", 2, 41), "orders") == (2, 41)
    assert of_input(("orders", 0, 0), "orders") == (0, 0)
    assert of_input(("other", 2, 41), "orders") is None
    assert of_input(("orders", None, 41), "orders") is None
    assert of_input(("orders", 2, None), "orders") is None
    assert named_in(flink_source, "orders")(flink_letter(0)) == (2, 41)


def test_dead_letters_below_and_ahead_of_the_committed_offsets():
    dead = DeadLetters({0: {3, 9, 10}, 1: {7}, 2: {0}}, ForeignRecords("dlq"), again=[(0, 3), (0, 10)])
    committed = {0: 10, 1: 8}  # partition 2 has no committed offset: all of it is ahead
    assert dead.below(committed) == 3  # 3 and 9 of partition 0 (10 is at C: ahead), 7 of partition 1
    assert dead.below(committed, repeats=True) == 4  # 3 again; 10 again is ahead
    assert dead.ahead(committed) == 2
    dead.carried = {0: 5, 1: 1}
    assert dead.below(committed) == 9 and dead.ahead(committed) == 2


class Kafka:
    """Scans hand the messages given, once: the topic's partition -> the offset after the last."""

    def __init__(self, messages: list[Msg]) -> None:
        self.messages = messages

    def scan(self, name: str, topic: str, handle, done) -> dict[int, int]:
        for msg in self.messages:
            handle(msg)
        done()
        done = {m.partition(): m.offset() + 1 for m in self.messages}
        self.messages = []
        return done


def test_read_remembers_each_record_once_and_tells_repeats_and_other_producers_apart(tmp_path):
    hop = HOPS["iceberg-ingestion"]
    counts = CountStore(tmp_path / "counts.sqlite")
    letters = [flink_letter(0), flink_letter(1, ("orders", 0, 5)), flink_letter(2), Msg(3, b"stray"), Msg(4, b"x")]
    letters.append(flink_letter(5, ("orders", 7, 1)))  # a partition orders does not have: no record of it
    stores = SimpleNamespace(counts=counts, kafka=Kafka(letters))
    dead = read(stores, hop, flink_source, ("sources", "scan"), [0, 1, 2])  # type: ignore[arg-type]
    assert dead.sources == {0: {5}, 1: set(), 2: {41}} and dead.again == [(2, 41)] and dead.scanned == {0: 6}
    assert [(b.ref, b.position, b.records) for b in dead.foreign.batches] == [
        ("records:orders-dlq-flink:0@3", "0@5", 3)
    ]
    (writer,) = foreign_writers(hop, dead)
    assert (writer.output, writer.figure, writer.rows) == (hop.dead_letters.qualified_name, "dead_letters", 3)
    assert writer.what == "3 records that are no dead letter of orders, orders-dlq-flink offsets 0:3..5"

    acceptances.record(counts, hop.job.name, [writer], by="test", at=1.0)
    stores.kafka = Kafka([Msg(6, b"later")])
    again = read(stores, hop, flink_source, ("sources", "scan"), [0, 1, 2])  # type: ignore[arg-type]
    assert again.sources == dead.sources and again.scanned == {0: 7}
    assert [(b.ref, b.records) for b in again.foreign.batches] == [
        ("records:orders-dlq-flink:0@3", 3),
        ("records:orders-dlq-flink:0@6", 1),
    ]


def test_a_hop_without_dead_letters_has_none(tmp_path):
    from dataclasses import replace

    hop = replace(HOPS["iceberg-ingestion"], dead_letters=None)
    stores = SimpleNamespace(counts=CountStore(tmp_path / "c.sqlite"), kafka=Kafka([flink_letter(0)]))
    dead = read(stores, hop, flink_source, ("sources", "scan"), [0])  # type: ignore[arg-type]
    assert (dead.sources, dead.foreign.records, foreign_writers(hop, dead)) == ({0: set()}, 0, ())
