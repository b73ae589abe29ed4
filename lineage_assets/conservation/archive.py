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
objects in 3 partitions); narrow prefixes cost what they match (2.7 s for the same 30 000, 37 calls, once the
keys of an earlier run are remembered; the first run still pages through each folder).
"""

from __future__ import annotations

import bisect
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
from lineage_assets.conservation.hops import Hop
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


def place_of(key: str, prefix: str, topic: str, partitions: Iterable[int]) -> KeyPlace:
    """Parse ``key`` against the layout; ``problem`` says why it is not one of the sink's keys."""
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
        while i < len(self.starts) and self.starts[i] < b:
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
    dead = sorted({d for d in dead_letters if 0 <= d < end})
    ordered = sorted(objects, key=lambda o: (o.start, -o.lines, o.key))
    chain, others, pos = [], [], 0
    for o in ordered:
        if o.start >= pos and o.lines > 0:
            chain.append(o)
            pos = span_end(o.start, o.lines, dead)
        else:
            others.append(o)
    result = PartitionWalk()
    held = _Held()
    for o in chain + others:
        stop = span_end(o.start, o.lines, dead)
        free = held.outside(o.start, min(stop, end)) if o.start < end else []
        claimed = sum(b - a - _between(dead, a, b) for a, b in free)
        if claimed < o.lines:
            result.extra[o.key] = result.extra.get(o.key, 0) + o.lines - claimed
            if o.start < end:
                holder = next((h.key for h in chain if h.start <= o.start < span_end(h.start, h.lines, dead)), None)
                if holder and holder != o.key:
                    result.overlaps[o.key] = holder
        for a, b in free:
            held.add(a, b)
        result.held += claimed
    for a, b in held.outside(0, end):
        below, above = (a, min(b, cut)), (max(a, cut), b)
        pieces = _without(below[0], below[1], dead) if below[0] < below[1] else []
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
    lower = max(((o, i) for o, i in pairs if i <= a), default=(0, 0), key=lambda p: (p[1], p[0]))
    upper = min(((o, i) for o, i in pairs if i >= b), default=None, key=lambda p: (p[1], p[0]))
    first = lower[0] + (a - lower[1])
    if upper is None:
        return first, first + (b - a) - 1, False
    exact = upper[0] - lower[0] == upper[1] - lower[1]
    return (first, first + (b - a) - 1, True) if exact else (first, upper[0] - 1 - (upper[1] - b), False)


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


@dataclass
class Listing:
    #: key -> ETag (quotes kept, as S3 gives it)
    objects: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    seconds: float = 0.0
    how: str = ""


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
) -> Listing:
    """Every key under ``prefix`` with its ETag. ``full``: one paginated listing. Otherwise each partition folder is
    listed by start-offset shards (``plan_shards`` over the starts remembered from earlier runs) plus the keys
    before the first shard and after the last one; other folders and loose files in full."""
    began, lister, found = time.monotonic(), _Lister(s3, bucket, endpoint), Listing()
    if full:
        found.objects.update(lister.keys(prefix))
        found.how = "one paginated listing of the whole prefix"
    else:
        folders: list[str] = []
        for response in _delimited(lister, prefix):
            folders += [p["Prefix"] for p in response.get("CommonPrefixes", [])]
            found.objects.update((o["Key"], o["ETag"]) for o in response.get("Contents", []))
        tasks: list[Callable[[], list[tuple[str, str]]]] = []
        shards_total = 0
        for folder in folders:
            m = re.fullmatch(re.escape(prefix) + r"partition=(\d+)/", folder)
            partition = int(m.group(1)) if m and m.group(1) == str(int(m.group(1))) else None
            if partition is None or partition not in upper:
                tasks.append(lambda folder=folder: list(lister.keys(folder)))
                continue
            name = f"{folder}{topic}+{partition}+"
            shards = plan_shards(known_starts.get(partition, []), upper[partition])
            shards_total += len(shards)
            tasks += [lambda shard=name + shard: list(lister.keys(shard)) for shard in shards[:-1]]
            # what no shard covers: keys before the first one, and after the last one (once that one is listed)
            tasks.append(
                lambda folder=folder, first=name + shards[0]: list(lister.keys(folder, stop_at=first, page=10))
            )
            tasks.append(lambda folder=folder, last=name + shards[-1]: _last_and_after(lister, folder, last))
        with ThreadPoolExecutor(_LIST_THREADS) as pool:
            for keys in pool.map(lambda task: task(), tasks):
                found.objects.update(keys)
        found.how = (
            f"{len(folders)} folders, {shards_total} start-offset shards, each partition folder also checked for "
            "keys before the first shard and after the last"
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


def object_lines(
    s3: Any,
    bucket: str,
    listed: Mapping[str, str],
    remembered: Mapping[str, str],
    remember: Callable[[dict[str, str]], None],
    endpoint: str,
) -> tuple[dict[str, int], int]:
    """(key -> lines of every listed object still there, how many were read now). An object is read (GET) only
    when no count is remembered for its key and ETag; its count is remembered under the ETag the GET returned."""
    lines: dict[str, int] = {}
    todo = []
    for key, etag in listed.items():
        fact = json.loads(remembered[key]) if key in remembered else None
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

    remembered = counts.facts(objects_kind)
    first_ends = {p: end for p, (_, end) in kafka.offsets(topic).items()}
    partitions = sorted(first_ends)
    known_starts: dict[int, list[int]] = {p: [] for p in partitions}
    for key in remembered:
        place = place_of(key, prefix, topic, partitions)
        if place.partition is not None:
            known_starts[place.partition].append(place.start)  # type: ignore[arg-type]
    known_starts = {p: sorted(s) for p, s in known_starts.items()}

    # the cut: C before the listing, E after it
    tries = 0
    while True:
        tries += 1
        before = kafka.committed(topic, group, partitions)
        upper = {p: max([first_ends[p], *(s + 1 for s in known_starts[p][-1:])]) for p in partitions}
        listing = list_archive(stores.s3, bucket, prefix, topic, known_starts, upper, endpoint, full=stores.deep)
        after = kafka.committed(topic, group, partitions)
        if after == before or tries >= CUT_TRIES:
            break
        time.sleep(0.5)
    ends = {p: end for p, (_, end) in kafka.offsets(topic).items()}
    cut = {p: max(before[p], 0) for p in partitions}

    lines, read_now = object_lines(
        stores.s3, bucket, listing.objects, remembered, lambda f: counts.put_facts(objects_kind, f), endpoint
    )

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
    places = {k: place_of(k, prefix, topic, partitions) for k in lines}
    below = {k: int(v) for k, v in counts.facts(below_kind).items()}
    targets: dict[int, set[int]] = {p: {cut[p], ends[p]} for p in partitions}
    for place in places.values():
        if place.partition is not None and f"{place.partition}:{place.start}" not in below:
            targets[place.partition].add(place.start)  # type: ignore[arg-type]
    for p, offsets in dead_sources.items():
        targets[p] |= {o for o in offsets if f"{p}:{o}" not in below and o < ends[p]}
    counted = kafka.count(topic, {p: sorted(t) for p, t in targets.items()})
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
            first, last, exact = offsets_of(a, b, anchors)
            if exact:
                expected = object_key(prefix, topic, p, first)
                gone = " (was there: deleted)" if expected in remembered and expected not in lines else ""
                what = f"offsets {first}..{last} of partition {p}: no object holds them; expected {expected}{gone}"
            else:
                what = (
                    f"{b - a - _between(dead_positions, a, b)} records between offsets {first} and {last} "
                    f"of partition {p}: no object holds them"
                )
            lost = b - a - _between(dead_positions, a, b)
            writers.append(OtherWriter(output, what, -lost, ref=f"offsets:{topic}[{p}]:{first}..{last}"))
        if walked.first_pending is not None:
            first, _, exact = offsets_of(walked.first_pending, walked.first_pending + 1, anchors)
            first_pending[p] = first if exact else cut[p]
        ranges[str(p)] = {"from": origin[p], "committed": cut[p], "end": ends[p], "objects": len(by_partition[p])}

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
