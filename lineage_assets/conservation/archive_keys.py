"""The archive sink's object keys: ``<prefix>partition=<p>/<topic>+<p>+<start offset, 20 digits>.jsonl``, and where a
key puts an object (its partition and start offset), or why the sink cannot have written it."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: the start offset's width in the sink's object keys (ObjectKeys.java)
OFFSET_DIGITS = 20
EXTENSION = ".jsonl"


@dataclass(frozen=True)
class KeyPlace:
    """Where a key puts an object: its partition and start offset, or why the sink cannot have written it."""

    partition: int | None = None
    start: int | None = None
    problem: str = ""


def object_key(prefix: str, topic: str, partition: int, start: int) -> str:
    """The key the sink gives the object starting at ``start`` (ObjectKeys.objectKey)."""
    return f"{prefix}partition={partition}/{topic}+{partition}+{start:0{OFFSET_DIGITS}d}{EXTENSION}"


@functools.lru_cache(maxsize=16)
def _layout(prefix: str, topic: str) -> re.Pattern[str]:
    t = re.escape(topic)
    return re.compile(
        re.escape(prefix) + rf"partition=([1-9]\d*|0)/{t}\+([1-9]\d*|0)\+(\d{{{OFFSET_DIGITS}}}){re.escape(EXTENSION)}",
        re.ASCII,  # as the parse requires of the partition (str(int(...)) is ASCII), and the sink writes
    )


def place_of(key: str, prefix: str, topic: str, partitions: Iterable[int]) -> KeyPlace:
    """Parse ``key`` against the layout; ``problem`` says why it is not one of the sink's keys."""
    # the sink's own keys (nearly all): one match. A shortcut of the parse below, which gives every key it takes
    # the same place, so its mutants are equivalent (the tests judge both).
    fast = _layout(prefix, topic).fullmatch(key)  # pragma: no mutate (a shortcut: parsed below the same)
    if fast and fast.group(1) == fast.group(2) and int(fast.group(1)) in partitions:  # pragma: no mutate (as above)
        return KeyPlace(int(fast.group(1)), int(fast.group(3)))  # pragma: no mutate (as above)
    return parse_place(key, prefix, topic, partitions)


def parse_place(key: str, prefix: str, topic: str, partitions: Iterable[int]) -> KeyPlace:
    """``place_of`` without its shortcut: the folder, then the name, then whether they agree."""
    rest = key.removeprefix(prefix)
    m = re.fullmatch(r"partition=(\d+)/(.*)", rest, flags=re.DOTALL)
    if not m:
        return KeyPlace(problem="not in a partition=<p>/ folder")
    folder, name = m.group(1), m.group(2)
    n = re.fullmatch(re.escape(topic) + rf"\+(\d+)\+(\d{{{OFFSET_DIGITS}}}){re.escape(EXTENSION)}", name)
    if not n:
        return KeyPlace(problem=f"the name does not follow {topic}+<p>+<start offset, 20 digits>{EXTENSION}")
    partition, start = int(n.group(1)), int(n.group(2))
    if folder != str(int(folder)) or int(folder) != partition or n.group(1) != str(partition):
        return KeyPlace(problem=f"named for partition {n.group(1)} in folder partition={folder}")
    if partition not in set(partitions):
        return KeyPlace(problem=f"{topic} has no partition {partition}")
    return KeyPlace(partition, start)


def sink_place(key: str, heads: Mapping[str, int]) -> KeyPlace | None:
    """The place of one of the sink's own keys without a pattern: ``heads`` maps each partition's key head
    (``object_key`` up to the start offset) to the partition. None when ``key`` is not of that form (ask
    ``place_of``). A run places every remembered key, so this is the common case made cheap."""
    digits = key[-OFFSET_DIGITS - len(EXTENSION) : -len(EXTENSION)]
    partition = heads.get(key[: -OFFSET_DIGITS - len(EXTENSION)])
    if partition is None or not key.endswith(EXTENSION) or len(digits) != OFFSET_DIGITS or not digits.isdecimal():
        return None
    return KeyPlace(partition, int(digits))
