"""The archive's objects in record space, pure: read in start order, the sink's objects tile the committed records of
a partition (dead letters excepted); a hole no object and no dead letter explains is missing, an object starting
inside another's records holds extra lines, records above the cut that no object holds are pending."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Placed:
    """An object of one partition in record space: ``start`` = committed records below its start offset."""

    key: str
    start: int
    lines: int


@dataclass
class PartitionWalk:
    #: key -> lines that no record of the partition explains (held by another object already, or past the end)
    extra: dict[str, int] = field(default_factory=dict)
    #: [a, b) record positions below the cut that no object holds and no dead letter explains
    missing: list[tuple[int, int]] = field(default_factory=list)
    #: records at or above the cut not in an object (the sink's buffer; dead-lettered ones not yet committed)
    pending: int = 0
    #: dead-lettered records below the cut
    dead: int = 0
    #: records held by an object
    held: int = 0
    #: key -> the key of the object already holding its first record (the overlap's reason)
    overlaps: dict[str, str] = field(default_factory=dict)
    #: the first pending position (the oldest record the sink has not written yet)
    first_pending: int | None = None


def between(sorted_positions: list[int], a: int, b: int) -> int:
    return bisect.bisect_left(sorted_positions, b) - bisect.bisect_left(sorted_positions, a)


def span_end(start: int, lines: int, dead: list[int]) -> int:
    """The position after an object's last record: its lines take the next ``lines`` positions that were not
    dead-lettered (the sink skips those and goes on in the same object)."""
    end, counted = start + lines, 0
    while (k := between(dead, start, end)) != counted:
        end, counted = start + lines + k, k
    return end


class Held:
    """Disjoint sorted intervals of positions held by objects, merged when they touch (the chain is one run)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def outside(self, a: int, b: int) -> list[tuple[int, int]]:
        """The pieces of [a, b) no interval holds."""
        pieces, at = [], a
        i = bisect.bisect_right(self.ends, a)
        while i < len(self.starts):
            if self.starts[i] >= b:  # pragma: no mutate (> b: an interval starting at b adds the same last piece)
                break
            if self.starts[i] > at:
                pieces.append((at, self.starts[i]))
            at = max(at, self.ends[i])
            i += 1
        if at < b:
            pieces.append((at, b))
        return pieces

    def holds(self, position: int) -> bool:
        i = bisect.bisect_right(self.starts, position) - 1
        return i >= 0 and position < self.ends[i]

    def add(self, a: int, b: int) -> None:
        """Hold [a, b), which no interval holds yet."""
        i = bisect.bisect_left(self.starts, a)
        if i > 0 and self.ends[i - 1] == a:
            i -= 1
            self.ends[i] = b
        else:
            self.starts.insert(i, a)
            self.ends.insert(i, b)
        if i + 1 < len(self.starts) and self.starts[i + 1] == self.ends[i]:
            self.ends[i] = self.ends.pop(i + 1)
            self.starts.pop(i + 1)


def walk(objects: list[Placed], dead_letters: Iterable[int], cut: int, end: int) -> PartitionWalk:
    """Account for the records [0, ``end``) of one partition: which objects hold them, which were dead-lettered,
    which are missing (below ``cut``) or pending (at or above it), and which object lines are extra.

    The sink's own objects form a chain: each starts where the previous one's records end (or later, after
    records the sink never got to write). An object starting inside the chain's records is extra, apart from any
    records of a hole it happens to cover."""
    dead = sorted({d for d in dead_letters if d in range(end)})
    ordered = sorted(objects, key=lambda o: (o.start, -o.lines, o.key))
    chain, others, pos = [], [], 0
    stops: dict[int, int] = {}  # id of a chain object -> its span end (computed once)
    for o in ordered:
        if o.start >= pos:  # an object of no lines here holds nothing and moves no later object out
            chain.append(o)
            pos = span_end(o.start, o.lines, dead)
            stops[id(o)] = pos  # pragma: no mutate (a cache: without it the span end is computed again, the same)
        else:
            others.append(o)
    result = PartitionWalk()
    held = Held()
    for o in chain + others:
        stop = stops.get(id(o))  # pragma: no mutate (a cache of the chain's span ends: computed again, the same)
        if stop is None:
            stop = span_end(o.start, o.lines, dead)
        free = held.outside(o.start, min(stop, end))  # a chain object's whole span: the earlier ones end before it
        claimed = sum(b - a - between(dead, a, b) for a, b in free)
        if claimed < o.lines:
            result.extra[o.key] = result.extra.get(o.key, 0) + o.lines - claimed
            if o.start < end:
                # always found: an object outside the chain starts inside the span of the chain object before it
                holder = next(h.key for h in chain if h.start <= o.start < span_end(h.start, h.lines, dead))
                if holder != o.key:
                    result.overlaps[o.key] = holder
        for a, b in free:
            held.add(a, b)
        result.held += claimed
    for a, b in held.outside(0, end):
        below, above = (a, min(b, cut)), (max(a, cut), b)
        pieces = without(below[0], below[1], dead)  # none when the piece is above the cut
        if pieces:  # one hole, dead letters inside it included (a deleted object held records around them)
            result.missing.append((pieces[0][0], pieces[-1][1]))
        if above[0] < above[1]:
            result.pending += above[1] - above[0]
            if result.first_pending is None:
                result.first_pending = above[0]
    # dead letters at or above the cut inside an object's records are not committed yet either
    result.pending += sum(1 for d in dead[bisect.bisect_left(dead, cut) :] if held.holds(d))
    result.dead = bisect.bisect_left(dead, cut)
    return result


def without(a: int, b: int, dead: list[int]) -> list[tuple[int, int]]:
    """[a, b) split around the dead-lettered positions in it."""
    pieces, at = [], a
    for d in dead[bisect.bisect_left(dead, a) : bisect.bisect_left(dead, b)]:
        if d > at:
            pieces.append((at, d))
        at = d + 1
    if at < b:
        pieces.append((at, b))
    return pieces


def offsets_of(a: int, b: int, anchors: Mapping[int, int]) -> tuple[int, int, bool]:
    """Record positions [a, b) as offsets (first, last, exact) from ``anchors`` (offset -> records below it).
    Exact when no transaction marker lies between the anchors around the range; otherwise (first, last) bound the
    offsets the records lie between."""
    pairs = sorted(anchors.items())
    # (offset, records below) pairs rise together: the nearest anchor below is the highest, above the lowest
    lower = max(((o, i) for o, i in pairs if i <= a), default=(0, 0))
    upper = min(((o, i) for o, i in pairs if i >= b), default=None)
    first = lower[0] + (a - lower[1])
    if upper is None:
        return first, first + (b - a) - 1, False
    exact = upper[0] - lower[0] == upper[1] - lower[1]
    return (first, first + (b - a) - 1, True) if exact else (first, upper[0] - 1 - (upper[1] - b), False)


def hole_text(
    partition: int,
    a: int,
    b: int,
    lost: int,
    anchors: Mapping[int, int],
    key_at: Callable[[int], str],
    gone: set[str],
) -> tuple[str, int, int]:
    """(what, first offset, last offset) of the records at positions [a, b) that no object holds. Transaction
    markers (Debezium's exactly-once commits) between the anchors leave only bounds of the offsets; a hole that
    begins where a key that was there (``gone`` now) began is still named as that object's records."""
    first, last, exact = offsets_of(a, b, anchors)
    expected = key_at(first)
    if exact or expected in gone:
        deleted = " (was there: deleted)" if expected in gone else ""
        return (
            f"offsets {first}..{last} of partition {partition}: no object holds them; expected {expected}{deleted}",
            first,
            last,
        )
    return (
        f"{lost} records between offsets {first} and {last} of partition {partition}: no object holds them",
        first,
        last,
    )
