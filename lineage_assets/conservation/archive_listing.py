"""Listing the archive, sharded by start-offset prefixes: s3proxy's filesystem store reads every key's metadata under
a listing's prefix for each page, so narrow prefixes cost what they match. A run lists the shards where the sink
writes (at or above the last run's committed offsets) and re-lists the older ones in rotation, least recently
verified first (``ROTATION_KEYS`` keys a run)."""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_assets.conservation.archive_keys import OFFSET_DIGITS
from lineage_assets.conservation.archive_walk import between
from lineage_assets.conservation.balance import StoreUnavailable

#: a shard of the listing holds at most this many remembered keys (one page of ListObjectsV2)
SHARD_KEYS = 1000
#: listing calls at once (s3proxy answers them in parallel; most of a call's time is the store's)
_LIST_THREADS = 4
#: keys of old shards (and folder checks) re-listed per run in rotation, least recently verified first
ROTATION_KEYS = 3 * SHARD_KEYS
#: the rotation unit of a partition folder's keys outside every shard (two listings of the whole folder)
OUTSIDE = "outside"


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

    def pages(
        self, prefix: str, start_after: str = "", page: int = 1000, delimiter: str = ""
    ) -> Iterator[dict[str, Any]]:
        """ListObjectsV2 pages under ``prefix``; with ``delimiter`` its folders and loose files only."""
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": page}
        if start_after:
            args["StartAfter"] = start_after
        if delimiter:
            args["Delimiter"] = delimiter
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
                    old_units.append((partition, shard, max(1, between(starts, lo, hi))))
            old_units.append((partition, OUTSIDE, 2 * max(1, len(starts))))  # two listings of the whole folder
    if old_units:
        for partition, unit in choose_rotation(old_units, verified or {}, budget):
            plan = found.plans[partition]
            if unit == OUTSIDE:
                plan.outside = True
            else:
                plan.rotated.append(unit)
    for plan in found.plans.values():
        tasks += plan_tasks(lister, plan)
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


def plan_tasks(lister: _Lister, plan: FolderPlan) -> list[Callable[[], list[tuple[str, str]]]]:
    """The listings of one partition folder's plan: its listed shards, and with ``outside`` the keys before the
    first shard and after the last one (the last shard, then every key of the folder after it)."""
    plan.listed = sorted({*plan.listed, *plan.rotated})
    folder = plan.name.rsplit("/", 1)[0] + "/"
    last = plan.shards[-1]
    tasks: list[Callable[[], list[tuple[str, str]]]] = [
        lambda shard=plan.name + shard: list(lister.keys(shard)) for shard in plan.listed if shard != last
    ]
    if plan.outside:
        first = plan.name + plan.shards[0]
        tasks.append(lambda folder=folder, first=first: list(lister.keys(folder, stop_at=first, page=10)))
        tasks.append(lambda folder=folder, last=plan.name + last: _last_and_after(lister, folder, last))
    elif last in plan.listed:
        tasks.append(lambda shard=plan.name + last: list(lister.keys(shard)))
    return tasks


def _last_and_after(lister: _Lister, folder: str, last_shard: str) -> list[tuple[str, str]]:
    """The last shard, then every key of the folder after it."""
    keys = list(lister.keys(last_shard))
    after = max([last_shard, *(k for k, _ in keys)])
    return keys + list(lister.keys(folder, start_after=after))


def _delimited(lister: _Lister, prefix: str) -> Iterator[dict[str, Any]]:
    """The prefix's folders and loose files (Delimiter '/'; s3proxy walks only that level)."""
    return lister.pages(prefix, delimiter="/")


def s3_unavailable(endpoint: str, what: str, exc: Exception) -> StoreUnavailable:
    return StoreUnavailable(
        f"the object store at {endpoint} did not answer while {what} ({exc}); start it "
        "(`lineage-lab stack up object-store`) or check the object-store endpoint and credentials, then reconcile again"
    )


def age(seconds: float) -> str:
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
    stale = "never" if oldest <= 0 else f"{age(now - oldest)} ago"
    return (
        f"verified this run: {'; '.join(parts) or 'the folders and loose files'}. The other shards stand as "
        f"last listed (deletions and copies there are found when rotation re-lists them, {ROTATION_KEYS} keys a "
        f"run, least recently verified first; keys found gone or named are looked at every run); the oldest "
        f"verification is {stale}; `reconcile --deep` lists everything."
    )
