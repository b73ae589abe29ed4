"""The archive's values: each object's JSON lines weighed against the records of the input it holds.

An object of the sink holds, from the offset its key names, as many committed records of the topic as it has lines,
leaving out the records the dead letters hold. Its *expected* weight (checksums.py) is the sum of those records'
weights, read once per object (one pass over the new objects' offsets per partition) and remembered by key and line
count; its *actual* weight is the sum of its lines' weights, read with its lines (GET once per key and ETag). An
object whose two weights differ holds a record whose copied columns are not the input's: it is named. Records no
object holds are the counts' business (missing, pending); objects the counts name as other writers are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter

from lineage_assets.conservation.archive_objects import Figures
from lineage_assets.conservation.archive_run import ArchiveRun, Cut
from lineage_assets.conservation.avro_values import AvroValues
from lineage_assets.conservation.checksums import Field, source_text, weigh
from lineage_assets.conservation.values import CHECKSUM, ValueBalance

#: the objects a difference names at most (the rest are counted)
NAMED = 10


@dataclass(frozen=True)
class Held:
    """An object in its partition's chain: its key, start offset and lines."""

    key: str
    start: int
    lines: int


def line_weigher(fields: tuple[Field, ...]):
    """A JSON line's weight (0: not a JSON object, as a record that does not decode)."""

    def weigh_line(line: bytes) -> int:
        try:
            record = json.loads(line)
        except ValueError:
            return 0
        return weigh(record, fields, "output") if isinstance(record, dict) else 0

    return weigh_line


def fill(chain: list[Held], wanted: set[str], records: Iterable[tuple[int, int]], dead: set[int]) -> dict[str, int]:
    """key -> expected weight of each wanted object of one partition's ``chain`` (sorted by start), from the
    (offset, weight) of the partition's committed records from the first wanted start on. A record belongs to the
    object whose range it is in, until that object has its lines; the dead letters' records belong to none."""
    weights = dict.fromkeys(wanted, 0)
    held = dict.fromkeys(wanted, 0)
    done: set[str] = set()
    i = 0
    for offset, weight in records:
        while i + 1 < len(chain) and offset >= chain[i + 1].start:
            done.add(chain[i].key)  # the next object starts: this one holds no more
            i += 1
        if done >= wanted:
            break
        current = chain[i]
        if offset in dead or offset < current.start or current.key not in wanted or current.key in done:
            continue
        weights[current.key] += weight
        held[current.key] += 1
        if held[current.key] >= current.lines:
            done.add(current.key)
    return weights


def _weighed(run: ArchiveRun, avro: AvroValues, ranges: dict[int, tuple[int, int]]) -> Iterator[tuple[int, int, int]]:
    consumer = run.stores.kafka.consumer()
    try:
        for msg in run.stores.kafka.records(consumer, run.topic, ranges):
            yield msg.partition(), msg.offset(), weigh(avro.decode(msg.value()), run.fields, "input")
    finally:
        consumer.close()


def expected_weights(run: ArchiveRun, cut: Cut, chains: dict[int, list[Held]], dead: dict[int, set[int]]) -> dict:
    """key -> expected weight of every object of ``chains``: remembered, or read now for the objects new since."""
    kind = f"archive/{run.job}/expected"
    remembered = run.stores.counts.facts(kind)
    found: dict[str, int] = {}
    for chain in chains.values():
        for h in chain:
            fact = remembered.get(h.key, "")
            lines, _, weight = fact.partition(":")
            if lines == str(h.lines) and weight.lstrip("-").isdigit():
                found[h.key] = int(weight)
    wanted = {p: {h.key for h in chain if h.key not in found} for p, chain in chains.items()}
    ranges = {p: (min(h.start for h in chains[p] if h.key in keys), cut.ends[p]) for p, keys in wanted.items() if keys}
    if not ranges:
        return found
    avro = AvroValues(run.stores.resources.kafka.registry())
    lines_of = {h.key: h.lines for chain in chains.values() for h in chain}
    learned: dict[str, str] = {}
    for p, group in groupby(_weighed(run, avro, ranges), key=itemgetter(0)):
        records = ((offset, weight) for _, offset, weight in group)
        for key, weight in fill(chains[p], wanted[p], records, dead.get(p, set())).items():
            found[key] = weight
            learned[key] = f"{lines_of[key]}:{weight}"
    for keys in wanted.values():
        for key in keys - found.keys():
            found[key] = 0  # no record of its range was read (past the end): weighed 0, not remembered
    run.stores.counts.put_facts(kind, learned)
    return found


def archive_values(
    run: ArchiveRun,
    cut: Cut,
    figures: dict[str, Figures],
    dead: dict[int, set[int]],
    left_out: set[str],
) -> tuple[tuple[ValueBalance, ...], set[str]]:
    """The checksum of the copied columns over the sink's objects (none: the hop copies no column), and the keys of
    the objects whose weights differ. ``left_out``: keys the counts named as other writers or found below the
    counted range."""
    if not run.fields:
        return (), set()
    chains: dict[int, list[Held]] = {p: [] for p in run.partitions}
    for key, (lines, _) in figures.items():
        place = run.where(key)
        if place.partition is not None and key not in left_out and place.start < cut.ends[place.partition]:  # type: ignore[operator]
            chains[place.partition].append(Held(key, place.start, lines))  # type: ignore[arg-type]
    for chain in chains.values():
        chain.sort(key=lambda h: h.start)
    unweighed = sorted(h.key for c in chains.values() for h in c if figures[h.key][1] is None)
    if unweighed:
        why = f"object {unweighed[0]} not weighed"
        return (ValueBalance(CHECKSUM, source_text(run.fields), places=0, unknown=why),), set()
    expected = expected_weights(run, cut, chains, dead)
    held = [h for c in chains.values() for h in c]
    differ = [h for h in held if expected[h.key] != figures[h.key][1]]
    where = tuple(
        f"object {h.key} ({h.lines} lines from offset {h.start} of {run.topic}[{run.where(h.key).partition}])"
        for h in differ[:NAMED]
    ) + ((f"{len(differ) - NAMED} more objects",) if len(differ) > NAMED else ())
    return (
        ValueBalance(
            CHECKSUM,
            source_text(run.fields),
            in_=sum(expected[h.key] for h in held),
            out=sum(figures[h.key][1] or 0 for h in held),
            dead_letters=0,
            pending=0,
            where=where,
            places=0,
        ),
    ), {h.key for h in differ}
