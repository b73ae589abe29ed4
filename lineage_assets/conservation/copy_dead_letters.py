"""A copy's dead letters, the archive sink's and the Flink ingestion's alike.

Every record of the hop's dead-letter topic is remembered once, by its place there, with the input record it names:
Connect's error headers or the Flink job's JSON value. A record that names none is another producer's. It is
counted like every other writer's record and named in batches that acceptances close. The topic is scanned
incrementally, and the figures are read against the hop's committed offsets every run, so a consumer group moved
back needs no bookkeeping of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Message

from lineage_assets.conservation import acceptances
from lineage_assets.conservation.balance import OtherWriter
from lineage_assets.conservation.foreign_records import ForeignRecords
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores

#: Connect's dead-letter context headers (errors.deadletterqueue.context.headers.enable)
ERROR_TOPIC, ERROR_PARTITION, ERROR_OFFSET = (
    "__connect.errors.topic",
    "__connect.errors.partition",
    "__connect.errors.offset",
)

#: (topic, partition, offset) of the record a dead letter names; None where it names none
Source = tuple[str | None, int | None, int | None]
Parse = Callable[[Message], Source]


def connect_source(msg: Message) -> Source:
    """From Connect's error headers."""
    headers = {k: (v.decode(errors="replace") if v is not None else None) for k, v in msg.headers() or []}
    try:
        return headers.get(ERROR_TOPIC), int(headers[ERROR_PARTITION]), int(headers[ERROR_OFFSET])  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return headers.get(ERROR_TOPIC), None, None


def flink_source(msg: Message) -> Source:
    """From the Flink jobs' JSON value (``src_topic``, ``src_partition``, ``src_offset``)."""
    try:
        body = json.loads(msg.value())  # None or not JSON: TypeError or ValueError, caught below
        return body.get("src_topic"), int(body["src_partition"]), int(body["src_offset"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None, None, None


def of_input(source: Source, topic: str) -> tuple[int, int] | None:
    """(partition, offset) of the record of ``topic`` a dead letter names; None when it names none."""
    named, partition, offset = source
    return (partition, offset) if named == topic and partition is not None and offset is not None else None


def named_in(parse: Parse, topic: str) -> Callable[[Message], tuple[int, int] | None]:
    return lambda msg: of_input(parse(msg), topic)


@dataclass
class DeadLetters:
    """``sources``: input partition -> the offsets the dead letters name, each once; ``again``: the dead letters
    naming a record named before, as (partition, offset); ``foreign``: the records naming none, in batches;
    ``scanned``: the topic's partition -> the offset scanned up to; ``carried``: input partition -> dead letters
    below the committed offsets that a tally kept before this module counted (the Flink copy's, until 2026-12)."""

    sources: dict[int, set[int]]
    foreign: ForeignRecords
    again: list[tuple[int, int]] = field(default_factory=list)
    scanned: dict[int, int] = field(default_factory=dict)
    carried: dict[int, int] = field(default_factory=dict)

    def below(self, committed: Mapping[int, int], repeats: bool = False) -> int:
        """Dead letters whose record lies below the committed offsets (a partition with none: nothing is);
        ``repeats``: count each dead letter written again too (an exactly-once writer wrote it twice)."""
        named = [(p, o) for p, offsets in self.sources.items() for o in offsets]
        named += self.again if repeats else []
        return sum(self.carried.values()) + sum(1 for p, o in named if o < committed.get(p, 0))

    def ahead(self, committed: Mapping[int, int]) -> int:
        """Dead letters whose record lies at or above the committed offsets (counted with pending)."""
        return sum(1 for p, offsets in self.sources.items() for o in offsets if o >= committed.get(p, 0))


def read(stores: Stores, hop: Hop, parse: Parse, kinds: tuple[str, str], partitions: list[int]) -> DeadLetters:
    """The hop's dead letters now: the topic scanned from where the last run stopped (``kinds``: the facts each
    record is remembered under, the scan's name), each record's source parsed once (``parse``)."""
    facts_kind, scan = kinds
    found = DeadLetters({p: set() for p in partitions}, ForeignRecords(""))
    if hop.dead_letters is None:
        return found
    dlq, topic = hop.dead_letters.name, hop.input.name

    parsed: dict[str, str] = {}  # kept once per partition scanned, before the scan's position moves past it

    def remember(msg: Message) -> None:
        named, partition, offset = parse(msg)
        parsed[f"{msg.partition()}:{msg.offset()}"] = json.dumps(
            {"topic": named, "partition": partition, "offset": offset}
        )

    def keep() -> None:
        stores.counts.put_facts(facts_kind, parsed)
        parsed.clear()

    found.scanned = dict(stores.kafka.scan(scan, dlq, remember, keep))
    foreign: list[tuple[int, int]] = []
    for at, text in stores.counts.facts(facts_kind).items():
        source = json.loads(text)
        named = of_input((source["topic"], source["partition"], source["offset"]), topic)
        if named is None or named[0] not in found.sources:
            partition, _, offset = at.partition(":")
            foreign.append((int(partition), int(offset)))
        elif named[1] in found.sources[named[0]]:
            found.again.append(named)
        else:
            found.sources[named[0]].add(named[1])
    found.foreign = ForeignRecords.of(dlq, foreign, acceptances.covered(stores.counts, hop.job.name))
    return found


def foreign_writers(hop: Hop, dead: DeadLetters) -> tuple[OtherWriter, ...]:
    """One other writer per batch of the dead-letter topic's records that name no record of the input."""
    if hop.dead_letters is None:
        return ()
    return dead.foreign.writers(
        hop.dead_letters.qualified_name,
        lambda b: f"{b.records} records that are no dead letter of {hop.input.name}, {b.topic} offsets {b.spans()}",
        figure="dead_letters",
    )
