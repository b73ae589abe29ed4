"""The per-key audit's judgement (pure): the range chosen, order_ids expected against those found, the archive's
lines placed on the records they were written for (missing, doubled, mismatched), and the audit's result and notes."""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lineage_assets.conservation.archive_keys import OFFSET_DIGITS
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores

#: the range audited when none is chosen: the last N offsets of each partition
DEFAULT_LAST = 10_000
#: examples named per kind of finding
EXAMPLES = 5
Position = tuple[int, int]  # (partition, offset)


def spans_of(
    deep_range: Mapping[str, Any], committed: Mapping[int, int], log_start: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """partition -> [from, to) offsets to audit, below the committed offsets ``committed`` (what the hop has taken
    over: records at or above are pending, not lost) and at or above the log start."""
    spans: dict[int, tuple[int, int]] = {}
    last = int(deep_range.get("last") or DEFAULT_LAST)
    for p in sorted(committed):
        if "partition" in deep_range and int(deep_range["partition"]) != p:
            continue
        top = committed[p]
        a = max(int(deep_range.get("from", top - last)), log_start.get(p, 0))
        b = min(int(deep_range.get("to", top)), top)  # the group never committed here (-1001): b < 0 <= a
        if a < b:
            spans[p] = (a, b)
    return spans


def compare_counts(expected: Mapping[str, int], found: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(id -> copies missing, id -> copies too many) of the ids ``expected`` names, found ``found`` times."""
    missing = {k: n - found.get(k, 0) for k, n in expected.items() if found.get(k, 0) < n}
    doubled = {k: found[k] - n for k, n in expected.items() if found.get(k, 0) > n}
    return missing, doubled


def decimal_prefixes(lo: int, hi: int, width: int = OFFSET_DIGITS) -> list[str]:
    """Zero-padded decimal prefixes, in order, whose numbers are exactly [lo, hi): narrow listings of the sink's
    keys by start offset (s3proxy reads the metadata of every key under a listing's prefix, so a wide prefix costs
    every key of the folder)."""
    found: list[str] = []

    def split(prefix: str, start: int, size: int) -> None:
        end = start + size
        if start >= hi:
            return
        if end <= lo:  # pragma: no mutate (end < lo: a block ending at lo is split further, none of it kept)
            return
        if lo <= start and end <= hi:
            found.append(prefix)
            return
        step = size // 10
        for d in range(10):
            split(prefix + str(d), start + d * step, step)

    if lo < hi:  # pragma: no mutate (lo <= hi: an empty range splits down to nothing, [] the same)
        split("", 0, 10**width)
    return found


@dataclass
class ArchiveFindings:
    """One partition of the archive compared with the records: lists of offsets (and the keys involved)."""

    #: offsets in the span that no line holds
    missing: list[int] = field(default_factory=list)
    #: offset -> the keys of the objects whose lines hold it (two or more)
    doubled: dict[int, list[str]] = field(default_factory=dict)
    #: (offset, key, line number from 1, the line's order_id, the record's order_id)
    mismatched: list[tuple[int, str, int, str | None, str | None]] = field(default_factory=list)
    #: lines beyond the records read (past the span: not judged)
    beyond: int = 0
    #: offsets in the span held by exactly one line
    held: int = 0
    #: lines on records of aborted transactions (the sink reads uncommitted): placed, not judged
    aborted: int = 0


def compare_archive(
    span: tuple[int, int],
    records: Mapping[int, str | None],
    objects: Mapping[str, tuple[int, list[str | None]]],
    aborted: Collection[int] = (),
) -> ArchiveFindings:
    """Compare objects (key -> (start offset, the order_id of each line)) with ``records`` (offset -> order_id, the
    records the sink writes a line for: dead letters and tombstones left out, read from at least the first object's
    start up to the span's end). Line i of an object starting at s holds the i-th record at or after s. ``aborted``:
    offsets among ``records`` of aborted transactions (Connect's sink consumer reads uncommitted, so it writes them):
    they take a line, but only committed records are judged."""
    a, b = span
    aborted = set(aborted)
    eligible = sorted(records)
    holders: dict[int, list[str]] = {}
    found = ArchiveFindings()
    for key, (start, lines) in sorted(objects.items(), key=lambda kv: (kv[1][0], kv[0])):
        first = bisect.bisect_left(eligible, start)
        for i, line_id in enumerate(lines):
            if first + i >= len(eligible):
                found.beyond += len(lines) - i
                break
            offset = eligible[first + i]
            if not a <= offset < b:
                if offset >= b:
                    found.beyond += 1
                continue
            if offset in aborted:
                found.aborted += 1
                continue
            holders.setdefault(offset, []).append(key)
            expected = records[offset]
            if expected is not None and line_id != expected:
                found.mismatched.append((offset, key, i + 1, line_id, expected))
    for offset in eligible[bisect.bisect_left(eligible, a) : bisect.bisect_left(eligible, b)]:
        if offset in aborted:
            continue
        keys = holders.get(offset, [])
        if not keys:
            found.missing.append(offset)
        elif len(keys) > 1:
            found.doubled[offset] = keys
        else:
            found.held += 1
    return found


def key_runs(by_offset: Mapping[int, list[str]]) -> list[tuple[int, int, list[str]]]:
    """Consecutive offsets held by the same keys, as (first, last, keys) runs."""
    runs: list[tuple[int, int, list[str]]] = []
    for o in sorted(by_offset):
        if runs and runs[-1][1] + 1 == o and runs[-1][2] == by_offset[o]:
            runs[-1] = (runs[-1][0], o, runs[-1][2])
        else:
            runs.append((o, o, by_offset[o]))
    return runs


def examples(items: Iterable[str], total: int | None = None) -> str:
    shown = list(items)[:EXAMPLES]
    if not shown:
        return ""
    more = (total if total is not None else len(shown)) > len(shown)
    return f" ({', '.join(shown)}{' ...' if more else ''})"


def audited(hop: Hop, topic: str, spans, stores: Stores, group: str, result: KeyAudit) -> str:
    """The head every audit's note begins with: the range read and what of it the dead letters explain."""
    dlq = hop.dead_letters.name if hop.dead_letters else "no DLQ"
    return (
        f"deep audit of {describe_spans(topic, spans)} ({chosen(stores.deep_range)} below group {group}'s "
        f"committed offsets): {result.records} records, {result.dead_lettered} dead-lettered in {dlq}"
    )


def chosen(deep_range: Mapping[str, Any]) -> str:
    if "partition" in deep_range or "from" in deep_range or "to" in deep_range:
        return "the chosen offsets, clipped to the log start and"
    return f"the last {int(deep_range.get('last') or DEFAULT_LAST)} offsets of each partition"


def describe_spans(topic: str, spans: Mapping[int, tuple[int, int]]) -> str:
    return " ".join(f"{topic}[{p}]@{a}..{b - 1}" for p, (a, b) in sorted(spans.items())) or "no records"


def offset_spans(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted offsets as [first, last] runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for o in sorted(offsets):
        if runs and runs[-1][1] + 1 == o:
            runs[-1] = (runs[-1][0], o)
        else:
            runs.append((o, o))
    return runs


@dataclass
class KeyAudit:
    """What the per-key audit of one hop found; ``notes`` is what it adds to the hop's balance."""

    job: str
    topic: str
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: committed records read in the spans
    records: int = 0
    dead_lettered: int = 0
    tombstones: int = 0
    #: records neither dead-lettered nor decodable (their id is unknown: not judged)
    undecoded: int = 0
    #: keys expected in no output copy (Iceberg: order_ids; the archive: "topic[p]@offset")
    missing: list[str] = field(default_factory=list)
    #: keys held more often than the range explains
    doubled: list[str] = field(default_factory=list)
    #: archive lines whose order_id is not the record's ("topic[p]@offset in key: line says X, record Y")
    mismatched: list[str] = field(default_factory=list)
    #: archive objects read
    objects: list[str] = field(default_factory=list)
    #: archive objects holding a doubled offset or a mismatched line
    objects_named: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not (self.missing or self.doubled or self.mismatched)
