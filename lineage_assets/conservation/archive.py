"""The orders-s3-sink hop: Kafka ``orders`` -> JSON-lines objects in the archive bucket, refusals in ``orders-dlq``.

The sink (``connect/s3-jsonl-sink``) names each object after the partition and the offset of its first record
(``<prefix>partition=<p>/<topic>+<p>+<start, 20 digits>.jsonl``), writes one line per record in offset order,
skips the records it dead-letters, and commits its consumer offsets only after the objects below them are
uploaded. So the archive can be checked from its keys and remembered line counts alone:

- every object is put at a *record position*: the committed records of ``orders`` below its start offset (counted
  by ``KafkaCounter``, remembered per object), so transaction markers between offsets cannot fake a gap;
- read in start order, the sink's objects tile the records (dead letters excepted): a hole that no object and no
  dead letter explains is *missing* (an object deleted), an object that starts inside another's records, past the
  end of the topic, under a key off the layout or in another partition's folder holds *duplicates*;
- each object's lines are counted once (GET) and remembered by key and ETag, so a run reads only new objects.

The listing is sharded by start-offset prefixes: s3proxy's filesystem store reads the metadata of every key under
a listing's prefix for each page, so a paginated listing of one folder costs pages x keys (23-31 s for 30 000
objects in 3 partitions), even one page of it ~1 s for 13 000 keys; narrow prefixes cost what they match (0.2-0.4 s
for a shard of 1000 keys, a few ms for an empty one). And a run lists only what can have changed by the sink's hand:
the shards at or above the committed offsets of the last run (the sink uploads an object before it commits past
it), about one shard per partition. The older shards, and each folder's keys outside every shard (two listings of
the whole folder), are re-listed in rotation: ``ROTATION_KEYS`` keys a run, least recently verified first (a folder
check goes alone), so every unit is re-listed within about keys / (ROTATION_KEYS - SHARD_KEYS) + folders runs
(40 000 objects in 3 folders: ~23 runs, under 2 hours at the 5-minute schedule); until then the remembered keys of
an unlisted shard stand as last listed. The sink's keys found gone and the keys named as other writers are looked
at (HEAD) every run, so a repair clears at once. The notes say what was verified and how stale the oldest
verification is; ``--deep`` lists everything.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from lineage_assets.conservation.balance import HopBalance, OtherWriter, StoreUnavailable
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.kafka_counts import PartitionCount
from lineage_assets.conservation.stores import Stores

#: the start offset's width in the sink's object keys (ObjectKeys.java)
OFFSET_DIGITS = 20
EXTENSION = ".jsonl"
#: Connect's dead-letter context headers (errors.deadletterqueue.context.headers.enable)
ERROR_TOPIC, ERROR_PARTITION, ERROR_OFFSET = (
    "__connect.errors.topic",
    "__connect.errors.partition",
    "__connect.errors.offset",
)
#: a shard of the listing holds at most this many remembered keys (one page of ListObjectsV2)
SHARD_KEYS = 1000
#: times the cut is taken again when the sink committed during the listing
CUT_TRIES = 4
_GET_THREADS = 8
#: listing calls at once (s3proxy answers them in parallel; most of a call's time is the store's)
_LIST_THREADS = 4
#: keys of old shards (and folder checks) re-listed per run in rotation, least recently verified first
ROTATION_KEYS = 3 * SHARD_KEYS
#: the rotation unit of a partition folder's keys outside every shard (two listings of the whole folder)
OUTSIDE = "outside"


# ---------------------------------------------------------------------------------------------------------------
# Keys


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


# ---------------------------------------------------------------------------------------------------------------
# Record positions: the pure gap / overlap logic


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


def _between(sorted_positions: list[int], a: int, b: int) -> int:
    return bisect.bisect_left(sorted_positions, b) - bisect.bisect_left(sorted_positions, a)


def span_end(start: int, lines: int, dead: list[int]) -> int:
    """The position after an object's last record: its lines take the next ``lines`` positions that were not
    dead-lettered (the sink skips those and goes on in the same object)."""
    end, counted = start + lines, 0
    while (k := _between(dead, start, end)) != counted:
        end, counted = start + lines + k, k
    return end


class _Held:
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
    held = _Held()
    for o in chain + others:
        stop = stops.get(id(o))  # pragma: no mutate (a cache of the chain's span ends: computed again, the same)
        if stop is None:
            stop = span_end(o.start, o.lines, dead)
        free = held.outside(o.start, min(stop, end))  # a chain object's whole span: the earlier ones end before it
        claimed = sum(b - a - _between(dead, a, b) for a, b in free)
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
        pieces = _without(below[0], below[1], dead)  # none when the piece is above the cut
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


def _without(a: int, b: int, dead: list[int]) -> list[tuple[int, int]]:
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


# ---------------------------------------------------------------------------------------------------------------
# Listing


def plan_shards(starts: list[int], upper: int, limit: int = SHARD_KEYS) -> list[str]:
    """Digit prefixes of the start offset, in key order, that tile every 20-digit start from 0 up to ``upper``
    with at most ``limit`` of the remembered ``starts`` (sorted) each: one page each, costing what it matches."""
    shards: list[str] = []

    def split(prefix: str, lo: int, width: int) -> None:
        if bisect.bisect_left(starts, lo + width) - bisect.bisect_left(starts, lo) <= limit or len(prefix) == 20:
            shards.append(prefix)
            return
        step = width // 10
        for d in range(10):
            if d == 0 or lo + d * step < upper:
                split(prefix + str(d), lo + d * step, step)

    split("", 0, 10**OFFSET_DIGITS)
    return shards


def shard_range(shard: str) -> tuple[int, int]:
    """[first, after last) start offset a digit prefix of the 20-digit start covers."""
    width = 10 ** (OFFSET_DIGITS - len(shard))
    lo = int(shard) * width if shard else 0
    return lo, lo + width


def fresh_shards(shards: list[str], floor: int | None) -> list[str]:
    """The shards where the sink can have put an object since the last run: those covering start offsets at or
    above ``floor`` (the committed offset of the last run: the sink uploads an object before it commits past it,
    so an object uploaded later starts at or above it). All of them when nothing is remembered (None)."""
    if floor is None:
        return list(shards)
    return [s for s in shards if shard_range(s)[1] > floor]


def verified_at(partition: int, unit: str, verified: Mapping[str, float]) -> float:
    """When ``unit`` (a shard, or ``OUTSIDE``) of a partition folder was last listed (0: never). A shard split
    since it was listed inherits the time of the shorter prefix that covered it."""
    if unit == OUTSIDE:
        return verified.get(f"{partition}:{OUTSIDE}", 0.0)
    prefixes = {unit[:n] for n in range(len(unit))} | {unit}
    return max(verified.get(f"{partition}:{u}", 0.0) for u in prefixes)


def choose_rotation(
    units: list[tuple[int, str, int]], verified: Mapping[str, float], budget: int = ROTATION_KEYS
) -> list[tuple[int, str]]:
    """The old units (partition, shard or ``OUTSIDE``, cost in keys listed) re-listed this run: the least
    recently verified first, always one, then more while their keys fit ``budget``. So every unit is re-listed
    within (all units' keys / budget + units costlier than the budget) runs."""
    order = sorted(range(len(units)), key=lambda i: (verified_at(units[i][0], units[i][1], verified), i))
    chosen: list[tuple[int, str]] = []
    spent = 0
    for i in order:
        p, unit, cost = units[i]
        if chosen and spent + cost > budget:
            continue
        chosen.append((p, unit))
        spent += cost
    return chosen


@dataclass
class FolderPlan:
    """What the listing reads of one partition folder this run."""

    name: str  # folder + "<topic>+<p>+": where the sink's keys lie
    shards: list[str]  # every shard, in key order
    listed: list[str]  # the shards listed this run (fresh and rotated)
    outside: bool  # the folder's keys outside every shard (before the first, after the last) listed too
    rotated: list[str] = field(default_factory=list)  # of ``listed``: the old shards re-listed in rotation


@dataclass
class Listing:
    #: key -> ETag (quotes kept, as S3 gives it)
    objects: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    seconds: float = 0.0
    how: str = ""
    #: partition -> what was listed of its folder (absent: the folder was not there, or listed whole)
    plans: dict[int, FolderPlan] = field(default_factory=dict)
    #: prefixes listed whole (the whole archive with ``full``, folders of no partition)
    whole: list[str] = field(default_factory=list)
    #: the prefix every partition folder lies under (``<prefix>partition=``)
    folders_under: str = ""

    def covers(self, key: str) -> bool:
        """Whether this run's listing would have found ``key`` (so a remembered key it did not find is gone)."""
        if any(key.startswith(w) for w in self.whole):
            return True
        plan = None
        if key.startswith(self.folders_under):
            folder = key[len(self.folders_under) : key.find("/", len(self.folders_under))]
            plan = self.plans.get(int(folder)) if folder.isdigit() and folder == str(int(folder)) else None
        if plan is None:  # a loose file or a folder listed whole (or not there): every run lists those
            return True
        rest = key[len(plan.name) :] if key.startswith(plan.name) else None
        if rest is not None:
            i = bisect.bisect_right(plan.shards, rest) - 1
            if i >= 0 and rest.startswith(plan.shards[i]):
                return plan.shards[i] in plan.listed
        return plan.outside


class _Lister:
    def __init__(self, s3: Any, bucket: str, endpoint: str) -> None:
        self.s3, self.bucket, self.endpoint = s3, bucket, endpoint
        self.calls = 0
        self._lock = threading.Lock()

    def counted(self) -> None:
        with self._lock:
            self.calls += 1

    def pages(self, prefix: str, start_after: str = "", page: int = 1000) -> Iterator[dict[str, Any]]:
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": page}
        if start_after:
            args["StartAfter"] = start_after
        while True:
            try:
                response = self.s3.list_objects_v2(**args)
            except (BotoCoreError, ClientError) as exc:
                raise s3_unavailable(self.endpoint, f"listing s3://{self.bucket}/{prefix}", exc) from exc
            self.counted()
            yield response
            if not response.get("IsTruncated"):
                return
            args.pop("StartAfter", None)
            args["ContinuationToken"] = response["NextContinuationToken"]

    def keys(self, prefix: str, start_after: str = "", stop_at: str | None = None, page: int = 1000):
        """(key, etag) under ``prefix`` in key order, after ``start_after``, before ``stop_at``."""
        for response in self.pages(prefix, start_after, page):
            for obj in response.get("Contents", []):
                if stop_at is not None and obj["Key"] >= stop_at:
                    return
                yield obj["Key"], obj["ETag"]


def list_archive(
    s3: Any,
    bucket: str,
    prefix: str,
    topic: str,
    known_starts: Mapping[int, list[int]],
    upper: Mapping[int, int],
    endpoint: str,
    full: bool = False,
    floors: Mapping[int, int] | None = None,
    verified: Mapping[str, float] | None = None,
    budget: int = ROTATION_KEYS,
) -> Listing:
    """Keys under ``prefix`` with their ETags. ``full``: one paginated listing of everything. Otherwise each
    partition folder is listed by start-offset shards (``plan_shards`` over the starts remembered from earlier
    runs, up to and including ``upper``); other folders and loose files in full. With ``floors`` (partition ->
    the committed offset of the last run) only the shards at or above it are listed, plus the old shards and
    folder checks ``choose_rotation`` picks from ``verified``; without, every shard and the keys before the first
    shard and after the last one (``Listing.covers`` tells what was listed)."""
    began, lister = time.monotonic(), _Lister(s3, bucket, endpoint)
    found = Listing(folders_under=f"{prefix}partition=")
    if full:
        found.objects.update(lister.keys(prefix))
        found.whole.append(prefix)
        found.how = "one paginated listing of the whole prefix"
        found.calls, found.seconds = lister.calls, time.monotonic() - began
        return found
    folders: list[str] = []
    for response in _delimited(lister, prefix):
        folders += [p["Prefix"] for p in response.get("CommonPrefixes", [])]
        found.objects.update((o["Key"], o["ETag"]) for o in response.get("Contents", []))
    tasks: list[Callable[[], list[tuple[str, str]]]] = []
    old_units: list[tuple[int, str, int]] = []
    for folder in folders:
        m = re.fullmatch(re.escape(prefix) + r"partition=(\d+)/", folder)
        partition = int(m.group(1)) if m and m.group(1) == str(int(m.group(1))) else None
        if partition is None or partition not in upper:
            found.whole.append(folder)
            tasks.append(lambda folder=folder: list(lister.keys(folder)))
            continue
        starts = known_starts.get(partition, [])
        shards = plan_shards(starts, upper[partition] + 1)  # + 1: the shard where the next object starts
        floor = None if floors is None else floors.get(partition)
        fresh = fresh_shards(shards, floor)
        plan = FolderPlan(f"{folder}{topic}+{partition}+", shards, fresh, outside=floor is None)
        found.plans[partition] = plan
        if floor is not None:
            for shard in shards:
                if shard not in fresh:
                    lo, hi = shard_range(shard)
                    old_units.append((partition, shard, max(1, _between(starts, lo, hi))))
            old_units.append((partition, OUTSIDE, 2 * max(1, len(starts))))  # two listings of the whole folder
    if old_units:
        for partition, unit in choose_rotation(old_units, verified or {}, budget):
            plan = found.plans[partition]
            if unit == OUTSIDE:
                plan.outside = True
            else:
                plan.rotated.append(unit)
    for plan in found.plans.values():
        plan.listed = sorted({*plan.listed, *plan.rotated})
        folder = plan.name.rsplit("/", 1)[0] + "/"
        last = plan.shards[-1]
        tasks += [lambda shard=plan.name + shard: list(lister.keys(shard)) for shard in plan.listed if shard != last]
        if plan.outside:  # keys before the first shard; the last shard, then every key of the folder after it
            first = plan.name + plan.shards[0]
            tasks.append(lambda folder=folder, first=first: list(lister.keys(folder, stop_at=first, page=10)))
            tasks.append(lambda folder=folder, last=plan.name + last: _last_and_after(lister, folder, last))
        elif last in plan.listed:
            tasks.append(lambda shard=plan.name + last: list(lister.keys(shard)))
    with ThreadPoolExecutor(_LIST_THREADS) as pool:
        for keys in pool.map(lambda task: task(), tasks):
            found.objects.update(keys)
    shards_total = sum(len(p.shards) for p in found.plans.values())
    listed = sum(len(p.listed) for p in found.plans.values())
    outside = sum(p.outside for p in found.plans.values())
    found.how = (
        f"{len(folders)} folders, {shards_total} start-offset shards of which {listed} listed, "
        f"{outside} partition folders also checked for keys before the first shard and after the last"
    )
    found.calls, found.seconds = lister.calls, time.monotonic() - began
    return found


def _last_and_after(lister: _Lister, folder: str, last_shard: str) -> list[tuple[str, str]]:
    """The last shard, then every key of the folder after it."""
    keys = list(lister.keys(last_shard))
    after = max([last_shard, *(k for k, _ in keys)])
    return keys + list(lister.keys(folder, start_after=after))


def _delimited(lister: _Lister, prefix: str) -> Iterator[dict[str, Any]]:
    """The prefix's folders and loose files (Delimiter '/'; s3proxy walks only that level)."""
    args: dict[str, Any] = {"Bucket": lister.bucket, "Prefix": prefix, "Delimiter": "/"}
    while True:
        try:
            response = lister.s3.list_objects_v2(**args)
        except (BotoCoreError, ClientError) as exc:
            raise s3_unavailable(lister.endpoint, f"listing s3://{lister.bucket}/{prefix}", exc) from exc
        lister.counted()
        yield response
        if not response.get("IsTruncated"):
            return
        args["ContinuationToken"] = response["NextContinuationToken"]


def s3_unavailable(endpoint: str, what: str, exc: Exception) -> StoreUnavailable:
    return StoreUnavailable(
        f"the object store at {endpoint} did not answer while {what} ({exc}); start it "
        "(`lineage-lab stack up object-store`) or check the object-store endpoint and credentials, then reconcile again"
    )


# ---------------------------------------------------------------------------------------------------------------
# Line counts, remembered by key and ETag


def count_lines(body: Iterable[bytes]) -> int:
    """JSON lines in an object: newlines, plus a last line without one."""
    lines, last = 0, b"\n"
    for chunk in body:
        if chunk:
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def fact_lines(text: str) -> int:
    """The line count of a remembered object fact (``{"etag": ..., "lines": n}``, as ``object_lines`` writes it),
    read from the end of the text: decoding 40 000 facts as JSON each run cost more than everything else."""
    head, sep, tail = text.rpartition(', "lines": ')
    if sep and head.startswith('{"etag": ') and tail.endswith("}") and tail[:-1].isdigit():
        return int(tail[:-1])
    return int(json.loads(text)["lines"])


def object_lines(
    s3: Any,
    bucket: str,
    listed: Mapping[str, str],
    remembered: Mapping[str, Any],
    remember: Callable[[dict[str, str]], None],
    endpoint: str,
) -> tuple[dict[str, int], int]:
    """(key -> lines of every listed object still there, how many were read now). An object is read (GET) only
    when no count is remembered for its key and ETag; its count is remembered under the ETag the GET returned."""
    lines: dict[str, int] = {}
    todo = []
    for key, etag in listed.items():
        fact = remembered.get(key)
        fact = json.loads(fact) if isinstance(fact, str) else fact
        if fact and fact["etag"] == etag:
            lines[key] = fact["lines"]
        else:
            todo.append(key)

    def read(key: str) -> tuple[str, str, int] | None:
        try:
            response = s3.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None  # deleted since the listing: not there now
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
        except BotoCoreError as exc:
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
        return key, response["ETag"], count_lines(response["Body"].iter_chunks(1 << 20))

    with ThreadPoolExecutor(_GET_THREADS) as pool:
        batch: dict[str, str] = {}
        for done in pool.map(read, todo):
            if done is None:
                continue
            key, etag, n = done
            lines[key] = n
            batch[key] = json.dumps({"etag": etag, "lines": n})
            if len(batch) >= 500:
                remember(batch)
                batch = {}
        if batch:
            remember(batch)
    return lines, len(todo)


# ---------------------------------------------------------------------------------------------------------------
# The hop


def _kinds(job: str) -> tuple[str, str, str]:
    return f"archive/{job}/objects", f"archive/{job}/dead-letters", f"archive/{job}/records-below"


def _listing_kinds(job: str) -> tuple[str, str, str, str]:
    """Facts of the rotating listing: when each unit was last listed, the committed offsets of the last run (the
    floor of the shards listed every run), the sink's keys found gone, the keys named as other writers last run."""
    return (
        f"archive/{job}/verified",
        f"archive/{job}/floors",
        f"archive/{job}/absent",
        f"archive/{job}/named",
    )


def _heads(s3: Any, bucket: str, keys: Iterable[str], endpoint: str) -> dict[str, str | None]:
    """key -> ETag now (None: not there) of a few keys, one HEAD each."""

    def head(key: str) -> tuple[str, str | None]:
        try:
            return key, s3.head_object(Bucket=bucket, Key=key)["ETag"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return key, None
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
        except BotoCoreError as exc:
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc

    todo = sorted(set(keys))
    if not todo:
        return {}
    with ThreadPoolExecutor(_GET_THREADS) as pool:
        return dict(pool.map(head, todo))


def _age(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def rotation_note(listing: Listing, verified: Mapping[str, float], now: float, deep: bool) -> str:
    """Which shards this run listed and how stale the oldest verification of an unlisted one is."""
    if deep:
        return "verified: every key of the archive listed this run (--deep)"
    parts, oldest = [], now
    for p, plan in sorted(listing.plans.items()):
        fresh = [s for s in plan.listed if s not in plan.rotated]
        what = f"partition {p}: {len(fresh)} shard(s) where the sink writes ({', '.join(s or '*' for s in fresh)})"
        if plan.rotated:
            what += f", {len(plan.rotated)} old re-listed in rotation ({', '.join(s or '*' for s in plan.rotated)})"
        if plan.outside:
            what += ", the keys outside every shard"
        parts.append(what)
        units = [*plan.shards, OUTSIDE]
        oldest = min([oldest, *(verified_at(p, u, verified) for u in units)])
    stale = "never" if oldest <= 0 else f"{_age(now - oldest)} ago"
    return (
        f"verified this run: {'; '.join(parts) or 'the folders and loose files'}. The other shards stand as "
        f"last listed (deletions and copies there are found when rotation re-lists them, {ROTATION_KEYS} keys a "
        f"run, least recently verified first; keys found gone or named are looked at every run); the oldest "
        f"verification is {stale}; `reconcile --deep` lists everything."
    )


def _dead_letter_handler(stores: Stores, kind: str) -> Callable[[Message], None]:
    """Remember each dead letter's source (topic, partition, offset) by its own position in the DLQ."""

    def handle(msg: Message) -> None:
        headers = {k: (v.decode("utf-8", "replace") if v is not None else None) for k, v in msg.headers() or []}
        source = {"topic": headers.get(ERROR_TOPIC), "partition": None, "offset": None}
        try:
            source["partition"] = int(headers[ERROR_PARTITION])  # type: ignore[arg-type]
            source["offset"] = int(headers[ERROR_OFFSET])  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            pass  # not written by Connect's error handling: counted apart
        stores.counts.put_facts(kind, {f"{msg.partition()}:{msg.offset()}": json.dumps(source)})

    return handle


def remembered_counts(
    store: CountStore, topic: str, targets: Mapping[int, Iterable[int]], ranges: Mapping[int, tuple[int, int]]
) -> dict[tuple[int, int], PartitionCount]:
    """What ``KafkaCounter.count`` would answer for the partitions whose every target already has a mark of its
    own, read from the marks alone. An idle partition ending in a transaction marker has its committed offset one
    below its end, so the counter would read from the one mark to the other, and wait out a consume timeout
    (0.2 s a partition) for nothing. Partitions with a target not marked yet are left out (count those)."""
    found: dict[tuple[int, int], PartitionCount] = {}
    for partition, wanted in targets.items():
        first = store.first_mark(topic, partition)
        if first is None or partition not in ranges:
            continue
        log_start, end = ranges[partition]
        clipped = {t: min(max(t, first[0]), end) for t in wanted}
        marks = {c: store.mark_below(topic, partition, c) for c in set(clipped.values())}
        if not marks or any(m is None or m[0] != c for c, m in marks.items()):
            continue
        if marks[min(marks)][0] < log_start:  # retention: the counter says so
            continue
        for t, c in clipped.items():
            found[(partition, t)] = PartitionCount(partition, first[0], c, marks[c][1], uncounted_before=first[0])  # type: ignore[index]
    return found


def _first_timestamp(stores: Stores, topic: str, at: dict[int, int]) -> float | None:
    """Epoch seconds of the oldest committed record at or after the given offsets (one record per partition)."""
    if not at:
        return None
    consumer = Consumer(
        stores.kafka.connection.client_config(
            **{
                "group.id": "lineage-lab-reconcile-archive",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
    )
    found: dict[int, float] = {}
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in at.items()])
        deadline = time.monotonic() + 5.0
        while len(found) < len(at) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            if msg.partition() not in found:
                found[msg.partition()] = msg.timestamp()[1] / 1000.0
    except KafkaException:
        return None  # only the age is lost; the figures stand
    finally:
        consumer.close()
    return min(found.values()) if found else None


def balance(hop: Hop, stores: Stores) -> HopBalance:
    """The hop's balance at the cut of the sink's committed offsets (see the module doc and the notes)."""
    job, topic = hop.job.name, hop.input.name
    output = hop.output.qualified_name
    bucket = hop.output.namespace.removeprefix("s3://")
    prefix = hop.output.name.strip("/") + "/"
    group = f"connect-{job}"
    endpoint = str(getattr(stores.s3.meta, "endpoint_url", "the object store"))
    objects_kind, dead_kind, below_kind = _kinds(job)
    kafka, counts = stores.kafka, stores.counts

    verified_kind, floors_kind, absent_kind, named_kind = _listing_kinds(job)
    remembered = counts.facts(objects_kind)  # JSON text: decoded only for the keys listed this run
    verified = {k: float(v) for k, v in counts.facts(verified_kind).items()}
    last_floors = {int(k): int(v) for k, v in counts.facts(floors_kind).items()}
    absent, named_before = counts.facts(absent_kind), counts.facts(named_kind)
    first_ends = {p: end for p, (_, end) in kafka.offsets(topic).items()}
    partitions = sorted(first_ends)
    known_starts: dict[int, list[int]] = {p: [] for p in partitions}
    seen_places: dict[str, KeyPlace] = {}
    sink_heads = {object_key(prefix, topic, p, 0)[: -OFFSET_DIGITS - len(EXTENSION)]: p for p in partitions}

    def where(key: str) -> KeyPlace:
        """``place_of``, once per key (a run places every remembered and listed key); the sink's own keys by
        slicing (``sink_place``), the rest by the layout's patterns."""
        place = seen_places.get(key)
        if place is None:
            place = seen_places[key] = sink_place(key, sink_heads) or place_of(key, prefix, topic, partitions)
        return place

    for key in remembered:
        place = where(key)
        if place.partition is not None:
            known_starts[place.partition].append(place.start)  # type: ignore[arg-type]
    known_starts = {p: sorted(s) for p, s in known_starts.items()}

    # the cut: C before the listing, E after it
    tries = 0
    while True:
        tries += 1
        before = kafka.committed(topic, group, partitions)
        upper = {p: max([first_ends[p], before[p], *(s + 1 for s in known_starts[p][-1:])]) for p in partitions}
        floors = None
        if all(p in last_floors for p in partitions):
            floors = {p: min(last_floors[p], max(before[p], 0)) for p in partitions}
        listing = list_archive(
            stores.s3, bucket, prefix, topic, known_starts, upper, endpoint, stores.deep, floors, verified
        )
        after = kafka.committed(topic, group, partitions)
        if after == before or tries >= CUT_TRIES:
            break
        time.sleep(0.5)
    ranges_now = kafka.offsets(topic)
    ends = {p: end for p, (_, end) in ranges_now.items()}
    cut = {p: max(before[p], 0) for p in partitions}

    # what the listing did not read: remembered keys stand as they were listed last (their shard is re-listed
    # in rotation); the sink's keys found gone and the keys named as other writers are looked at every run
    now = time.time()
    present = dict(listing.objects)
    suspects = {k for k in [*absent, *named_before] if k not in present and not listing.covers(k)}
    looked = _heads(stores.s3, bucket, suspects, endpoint)
    present.update({k: etag for k, etag in looked.items() if etag is not None})
    gone = {k for k, etag in looked.items() if etag is None} | {k for k in absent if k not in present}
    standing: dict[str, str] = {}  # remembered keys this run did not list: they stand as last listed
    for key, fact in remembered.items():
        if key in present or key in gone:
            continue
        if listing.covers(key):
            gone.add(key)
        else:
            standing[key] = fact
    sink_keys = {k for k in gone if where(k).partition is not None}
    newly_gone = {k: json.dumps(now) for k in sink_keys if k not in absent}
    if newly_gone:
        counts.put_facts(absent_kind, newly_gone)
    back = [k for k in absent if k in present]  # (an absent key is gone unless present: never standing)
    if back:
        counts.drop_facts(absent_kind, back)
    dropped = [k for k in gone if k in remembered]
    if dropped:
        counts.drop_facts(objects_kind, dropped)
    was_there = set(absent) | set(newly_gone) | set(dropped)

    lines, read_now = object_lines(
        stores.s3, bucket, present, remembered, lambda f: counts.put_facts(objects_kind, f), endpoint
    )
    lines.update((key, fact_lines(fact)) for key, fact in standing.items())

    # dead letters, scanned incrementally
    dead_sources: dict[int, set[int]] = {p: set() for p in partitions}
    foreign_dead = repeated_dead = 0
    if hop.dead_letters is not None:
        kafka.scan(f"archive/{job}/dlq", hop.dead_letters.name, _dead_letter_handler(stores, dead_kind))
        for text in counts.facts(dead_kind).values():
            source = json.loads(text)
            if source["topic"] != topic or source["partition"] not in dead_sources or source["offset"] is None:
                foreign_dead += 1
            elif source["offset"] in dead_sources[source["partition"]]:
                repeated_dead += 1
            else:
                dead_sources[source["partition"]].add(source["offset"])

    # record positions of the cut, the end, every object start and every dead letter
    places = {k: where(k) for k in lines}
    below = {k: int(v) for k, v in counts.facts(below_kind).items()}
    targets: dict[int, set[int]] = {p: {cut[p], ends[p]} for p in partitions}
    for place in places.values():
        if place.partition is not None and f"{place.partition}:{place.start}" not in below:
            targets[place.partition].add(place.start)  # type: ignore[arg-type]
    for p, offsets in dead_sources.items():
        targets[p] |= {o for o in offsets if f"{p}:{o}" not in below and o < ends[p]}
    counted = remembered_counts(counts, topic, targets, ranges_now)
    unknown = {p: sorted(t) for p, t in targets.items() if not any(q == p for q, _ in counted)}
    if unknown:
        counted |= kafka.count(topic, unknown)
    origin = {p: next(c.start for (q, _), c in counted.items() if q == p) for p in partitions}
    dead_sources = {p: {o for o in offsets if origin[p] <= o < ends[p]} for p, offsets in dead_sources.items()}
    # remembered: the positions of object starts and dead letters (the cut and the end move every run)
    lasting = {(pl.partition, pl.start) for pl in places.values() if pl.partition is not None}
    lasting |= {(p, o) for p, offsets in dead_sources.items() for o in offsets}
    learned = {f"{p}:{t}": str(c.records) for (p, t), c in counted.items() if c.upto == t and (p, t) in lasting}
    counts.put_facts(below_kind, {k: v for k, v in learned.items() if k not in below})
    below.update({k: int(v) for k, v in learned.items()})

    def position(p: int, offset: int) -> int | None:
        """Records below ``offset`` (None: past the end at the cut)."""
        if offset >= ends[p]:
            return None
        known = below.get(f"{p}:{offset}")
        return known if known is not None else counted[(p, offset)].records

    writers: list[OtherWriter] = []
    in_ = out = dead = pending = 0
    retained_out: list[str] = []
    first_pending: dict[int, int] = {}
    by_partition: dict[int, list[Placed]] = {p: [] for p in partitions}
    for key, n in sorted(lines.items()):
        place = places[key]
        if place.partition is None:
            writers.append(OtherWriter(output, f"object {key} ({place.problem})", n, ref=f"object:{key}"))
            out += n
        elif place.start < origin[place.partition]:  # type: ignore[operator]
            retained_out.append(key)  # its records were deleted by retention before counting began
        else:
            at = position(place.partition, place.start)  # type: ignore[arg-type]
            end_pos = counted[(place.partition, ends[place.partition])].records
            by_partition[place.partition].append(Placed(key, end_pos if at is None else at, n))
            out += n
    ranges: dict[str, Any] = {}
    for p in partitions:
        e, c = counted[(p, ends[p])].records, counted[(p, cut[p])].records
        dead_positions = sorted(d for d in (position(p, o) for o in dead_sources[p]) if d is not None)
        walked = walk(by_partition[p], dead_positions, c, e)
        in_, dead, pending = in_ + e, dead + walked.dead, pending + walked.pending
        anchors = {origin[p]: 0, cut[p]: c, ends[p]: e}
        anchors |= {o: below[f"{p}:{o}"] for o in [*dead_sources[p], *known_starts[p]] if f"{p}:{o}" in below}
        for placed in by_partition[p]:
            start = places[placed.key].start
            if start is not None and start < ends[p]:
                anchors[start] = placed.start
        for key, extra in sorted(walked.extra.items()):
            start = places[key].start
            reason = (
                f"start offset {start} is past the end {ends[p]} of partition {p}"
                if start is not None and start >= ends[p]
                else f"its records are already held by object {walked.overlaps[key]}"
                if key in walked.overlaps
                else "its records are already held by another object"
            )
            writers.append(OtherWriter(output, f"object {key} ({reason})", extra, ref=f"object:{key}"))
        for a, b in walked.missing:
            lost = b - a - _between(dead_positions, a, b)
            gone = was_there - lines.keys()
            what, first, last = hole_text(p, a, b, lost, anchors, functools.partial(object_key, prefix, topic, p), gone)
            writers.append(OtherWriter(output, what, -lost, ref=f"offsets:{topic}[{p}]:{first}..{last}"))
        if walked.first_pending is not None:
            first, _, exact = offsets_of(walked.first_pending, walked.first_pending + 1, anchors)
            first_pending[p] = first if exact else cut[p]
        ranges[str(p)] = {"from": origin[p], "committed": cut[p], "end": ends[p], "objects": len(by_partition[p])}

    # remembered for the next run: what was listed when, the floor of the shards listed every run, who was named
    listed_now: dict[str, str] = {}
    if stores.deep:
        listed_now = {f"{p}:{unit}": json.dumps(now) for p in partitions for unit in ("", OUTSIDE)}
    for p, plan in listing.plans.items():
        listed_now |= {f"{p}:{shard}": json.dumps(now) for shard in plan.listed}
        if plan.outside:
            listed_now[f"{p}:{OUTSIDE}"] = json.dumps(now)
    counts.put_facts(verified_kind, listed_now)
    verified |= {k: now for k in listed_now}
    counts.put_facts(floors_kind, {str(p): str(cut[p]) for p in partitions})
    named_now = {w.reference.removeprefix("object:") for w in writers if w.reference.startswith("object:")}
    if set(named_before) - named_now:
        counts.drop_facts(named_kind, sorted(set(named_before) - named_now))
    counts.put_facts(named_kind, {k: json.dumps(now) for k in named_now if k not in named_before})
    verification = rotation_note(listing, verified, now, stores.deep)

    dlq_name = hop.dead_letters.name if hop.dead_letters else "no dead-letter topic"
    notes = [
        f"cut: the sink's committed offsets (group {group}) read before the listing and again after it "
        f"({tries} tries: retried while they moved); the ones read before are used: an object holding records "
        "below them was uploaded before they were committed, so the listing has it. The end offsets are read "
        "after the listing, so every listed record lies below them.",
        f"in: committed records of {topic} from the first counted offset up to the end at the cut (read_committed, "
        "counted once, remembered as marks); pending: those at or above the committed offsets that no object holds "
        "yet (the sink's buffers), so in - pending = what the sink has committed plus objects uploaded whose commit "
        "was not yet seen.",
        f"out: JSON lines of the {len(lines)} objects under s3://{bucket}/{prefix}; {read_now} read now (new or "
        "changed ETag), the others remembered by key and ETag.",
        f"listing: {listing.calls} calls, {listing.seconds:.2f} s ({listing.how}).",
        verification,
        f"dead letters: distinct records of {topic} below the committed offsets that {dlq_name} "
        "holds (its __connect.errors.* headers, scanned incrementally); dead letters at or above them are pending"
        + (f"; {repeated_dead} dead-lettered again (counted once)" if repeated_dead else "")
        + (f"; {foreign_dead} without a source in {topic} (not counted)" if foreign_dead else ""),
        "objects are placed by the records below their start offset; a hole in the chain of objects that no dead "
        "letter explains is named missing, an object inside another's records, past the end, off the layout or in "
        "another partition's folder is named with its extra lines. Tombstones (skipped without a line or a dead "
        "letter) would show as missing: the orders topic has none.",
    ]
    if retained_out:
        notes.append(
            f"{len(retained_out)} objects start below the first counted offset (retention deleted those records "
            "before counting began): not counted"
        )
    return HopBalance(
        job=job,
        input=hop.input.qualified_name,
        outputs=hop.output_names,
        in_=in_,
        out=out,
        dead_letters=dead,
        pending=pending,
        range={"topic": topic, "archive": f"s3://{bucket}/{prefix}", "partitions": ranges},
        other_writers=tuple(writers),
        pending_since=_first_timestamp(stores, topic, first_pending) if pending else None,
        notes=tuple(notes),
    )
