"""Records another producer wrote into a Kafka topic, in batches that acceptances close.

Kafka cannot delete records from the middle of a partition, so a foreign producer's records stay; they are named as
one ``OtherWriter`` per batch. A batch's reference is its first record (``records:<topic>:<partition>@<offset>``):
it never changes as more records arrive. Its position is the last offset per partition it holds. A batch whose
reference is accepted is closed: the producer's later records open a new batch, named again under its own first
record, so an acceptance covers exactly the records it was given.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lineage_assets.conservation.balance import OtherWriter


@dataclass
class Run:
    """Records of one partition: how many, the rows they claim, the first and last offset, and the value they claim
    in the hop's summed column (units, values.py)."""

    records: int = 0
    rows: int = 0
    first: int = -1
    last: int = -1
    units: int = 0

    def add(self, offset: int, rows: int, units: int = 0) -> None:
        self.first = offset if self.records == 0 else min(self.first, offset)
        self.last = max(self.last, offset)
        self.records += 1
        self.rows += rows
        self.units += units

    def merge(self, other: Run) -> None:
        if other.records:
            self.first = other.first if self.records == 0 else min(self.first, other.first)
            self.last = max(self.last, other.last)
            self.records += other.records
            self.rows += other.rows
            self.units += other.units


@dataclass
class Batch:
    """One writer's records up to an acceptance: ``start`` is (partition, offset) of its first record."""

    topic: str
    start: tuple[int, int]
    runs: dict[int, Run] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"records:{self.topic}:{self.start[0]}@{self.start[1]}"

    @property
    def position(self) -> str:
        return ",".join(f"{p}@{r.last}" for p, r in sorted(self.runs.items()))

    @property
    def records(self) -> int:
        return sum(r.records for r in self.runs.values())

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.runs.values())

    @property
    def units(self) -> int:
        return sum(r.units for r in self.runs.values())

    def spans(self, sep: str = ":") -> str:
        return ", ".join(f"{p}{sep}{r.first}..{r.last}" for p, r in sorted(self.runs.items()) if r.records)


@dataclass
class ForeignRecords:
    """Every batch of one topic, oldest first (one more per acceptance: a handful)."""

    topic: str
    batches: list[Batch] = field(default_factory=list)

    def add(self, partition: int, offset: int, rows: int, accepted: Collection[str], units: int = 0) -> None:
        """Count one foreign record into the open batch, or a new one when the last batch's ref is accepted."""
        if not self.batches or self.batches[-1].ref in accepted:
            self.batches.append(Batch(self.topic, (partition, offset)))
        self.batches[-1].runs.setdefault(partition, Run()).add(offset, rows, units)

    @classmethod
    def of(cls, topic: str, records: Iterable[tuple[int, int]], covered: Mapping[str, str | None]) -> ForeignRecords:
        """The batches of records (partition, offset) a reader keeps one by one, not as batches: a batch takes the
        next record unless its acceptance (``covered``: ref -> position, None for any) ends before it."""
        found = cls(topic)
        for p, o in sorted(records):
            last = found.batches[-1] if found.batches else None
            if last is None or (last.ref in covered and not reaches(covered[last.ref], p, o)):
                last = Batch(topic, (p, o))
                found.batches.append(last)
            last.runs.setdefault(p, Run()).add(o, 1)
        return found

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches)

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches)

    @property
    def units(self) -> int:
        return sum(b.units for b in self.batches)

    def writers(
        self,
        output: str,
        describe: Any,
        figure: Literal["out", "dead_letters"] = "out",
        summed: tuple[str, ...] = (),
    ) -> tuple[OtherWriter, ...]:
        """One ``OtherWriter`` per batch; ``describe(batch)`` says what it is; ``summed``: the output column the
        records' units claim a value in (value conservation), if any."""
        return tuple(
            OtherWriter(
                output, describe(b), b.rows, b.ref, b.position, figure, claimed=tuple((c, b.units) for c in summed)
            )
            for b in self.batches
            if b.records
        )

    def as_json(self) -> list[Any]:
        return [
            [
                b.start[0],
                b.start[1],
                {str(p): [r.records, r.rows, r.first, r.last, r.units] for p, r in b.runs.items()},
            ]
            for b in self.batches
        ]

    @classmethod
    def from_json(cls, topic: str, raw: list[Any] | None) -> ForeignRecords:
        batches = [
            Batch(topic, (int(p0), int(o0)), {int(p): Run(*v) for p, v in runs.items()}) for p0, o0, runs in raw or []
        ]
        return cls(topic, batches)


def reaches(position: str | None, partition: int, offset: int) -> bool:
    """Whether an acceptance up to ``position`` (``Batch.position``: ``<partition>@<last offset>,...``; None: any)
    covers the record at ``offset`` of ``partition``."""
    if position is None:
        return True
    last = dict(part.split("@") for part in position.split(",") if "@" in part).get(str(partition))
    return last is not None and offset <= int(last)
