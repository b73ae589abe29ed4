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

import functools
import json
import time
from typing import Any

from lineage_assets.conservation.archive_keys import (
    EXTENSION,
    OFFSET_DIGITS,
    KeyPlace,
    object_key,
    place_of,
    sink_place,
)
from lineage_assets.conservation.archive_listing import OUTSIDE, list_archive, rotation_note
from lineage_assets.conservation.archive_objects import (
    dead_letter_handler,
    fact_lines,
    first_timestamp,
    heads,
    object_lines,
    remembered_counts,
)
from lineage_assets.conservation.archive_walk import Placed, between, hole_text, offsets_of, walk
from lineage_assets.conservation.balance import HopBalance, OtherWriter
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores

#: times the cut is taken again when the sink committed during the listing
CUT_TRIES = 4


def kinds(job: str) -> tuple[str, str, str]:
    return f"archive/{job}/objects", f"archive/{job}/dead-letters", f"archive/{job}/records-below"


def listing_kinds(job: str) -> tuple[str, str, str, str]:
    """Facts of the rotating listing: when each unit was last listed, the committed offsets of the last run (the
    floor of the shards listed every run), the sink's keys found gone, the keys named as other writers last run."""
    return (
        f"archive/{job}/verified",
        f"archive/{job}/floors",
        f"archive/{job}/absent",
        f"archive/{job}/named",
    )


def balance(hop: Hop, stores: Stores) -> HopBalance:
    """The hop's balance at the cut of the sink's committed offsets (see the module doc and the notes)."""
    job, topic = hop.job.name, hop.input.name
    output = hop.output.qualified_name
    bucket = hop.output.namespace.removeprefix("s3://")
    prefix = hop.output.name.strip("/") + "/"
    group = f"connect-{job}"
    endpoint = str(getattr(stores.s3.meta, "endpoint_url", "the object store"))
    objects_kind, dead_kind, below_kind = kinds(job)
    kafka, counts = stores.kafka, stores.counts

    verified_kind, floors_kind, absent_kind, named_kind = listing_kinds(job)
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
    looked = heads(stores.s3, bucket, suspects, endpoint)
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
        kafka.scan(f"archive/{job}/dlq", hop.dead_letters.name, dead_letter_handler(stores, dead_kind))
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
            lost = b - a - between(dead_positions, a, b)
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
        pending_since=first_timestamp(stores, topic, first_pending) if pending else None,
        notes=tuple(notes),
    )
