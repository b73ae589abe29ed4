"""iceberg-ingestion's dead letters, tallied per source partition: the DLQ records whose source offset lies below the
group's committed offsets (they stay below: C only grows), those still ahead, and DLQ records that are no dead letter
of the input (another producer's), in batches."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from lineage_assets.conservation.foreign_records import Batch, ForeignRecords, Run

#: the committed offset of a partition the tally has none for: below every offset (a constant, so that mutating
#: it to another negative number is not a mutant no test can tell apart)
NO_OFFSET = -1


@dataclass
class DeadLetterTally:
    """``below``: source partition -> dead letters whose source offset lies below the group's committed offset
    (they stay below: C only grows); ``ahead``: source offsets of dead letters not yet below it; ``foreign``: DLQ
    records that are no dead letter of this hop's input (another topic, not the job's JSON), in batches."""

    below: dict[int, int] = field(default_factory=dict)
    ahead: dict[int, list[int]] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)
    foreign: ForeignRecords = field(default_factory=lambda: ForeignRecords(""))
    #: DLQ partition -> offset tallied up to (the scan resumes there)
    tallied: dict[int, int] = field(default_factory=dict)

    def add(self, src_partition: int, src_offset: int) -> None:
        self.ahead.setdefault(src_partition, []).append(src_offset)

    def add_foreign(self, partition: int, offset: int, accepted: frozenset[str] = frozenset()) -> None:
        self.foreign.add(partition, offset, 1, accepted)

    def settle(self, committed: Mapping[int, int]) -> None:
        """Move the dead letters whose source offset is now below C into ``below``."""
        for partition, offsets in list(self.ahead.items()):
            c = committed.get(partition, NO_OFFSET)
            done = [o for o in offsets if o < c]
            if done:
                self.below[partition] = self.below.get(partition, 0) + len(done)
                self.ahead[partition] = [o for o in offsets if o >= c]
            if not self.ahead[partition]:
                del self.ahead[partition]
        self.committed = {p: max(o, self.committed.get(p, NO_OFFSET)) for p, o in committed.items()}

    def moved_back(self, committed: Mapping[int, int]) -> dict[int, tuple[int, int]]:
        """partition -> (C tallied against, C now) where the group's offset went back (a reset of the group)."""
        return {p: (self.committed[p], c) for p, c in committed.items() if 0 <= c < self.committed.get(p, NO_OFFSET)}

    @property
    def dead_letters(self) -> int:
        return sum(self.below.values())

    @property
    def ahead_count(self) -> int:
        return sum(len(v) for v in self.ahead.values())

    def to_json(self) -> str:
        return json.dumps(
            {
                "below": self.below,
                "ahead": self.ahead,
                "committed": self.committed,
                "foreign_batches": self.foreign.as_json(),
                "tallied": self.tallied,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str, dlq: str) -> DeadLetterTally:
        raw = json.loads(text)

        def ints(d: dict) -> dict:
            return {int(k): v for k, v in d.items()}

        foreign = (
            ForeignRecords.from_json(dlq, raw["foreign_batches"])
            if "foreign_batches" in raw
            else legacy_foreign(dlq, raw.get("foreign", 0), raw.get("foreign_examples", []))
        )
        return cls(ints(raw["below"]), ints(raw["ahead"]), ints(raw["committed"]), foreign, ints(raw["tallied"]))


def legacy_foreign(dlq: str, count: int, examples: list[str]) -> ForeignRecords:
    """A tally kept before batches were (a count and up to 5 ``<dlq>[<p>]@<offset>`` examples): one batch at the
    first example, its count exact."""
    if not count:
        return ForeignRecords(dlq)
    at = [(int(m[1]), int(m[2])) for e in examples if (m := re.search(r"\[(\d+)\]@(\d+)$", e))] or [(0, 0)]
    p, first = at[0]
    last = max(o for q, o in at if q == p)
    return ForeignRecords(dlq, [Batch(dlq, (p, first), {p: Run(count, count, first, last)})])


def dead_letter_source(value: bytes | None, input_topic: str) -> tuple[int, int] | None:
    """(source partition, source offset) of one DLQ record the job wrote for ``input_topic``; None otherwise."""
    try:
        body = json.loads(value)  # None or not JSON: TypeError or ValueError, caught below
        if body.get("src_topic") != input_topic:
            return None
        return int(body["src_partition"]), int(body["src_offset"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
