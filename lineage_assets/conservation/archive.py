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

The listing (``archive_listing.py``) reads the shards where the sink writes every run and the older ones in
rotation; the sink's keys found gone and the keys named as other writers are looked at (HEAD) every run, so a repair
clears at once. The notes say what was verified and how stale the oldest verification is; ``--deep`` lists
everything.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from lineage_assets.conservation import copy_dead_letters
from lineage_assets.conservation.archive_keys import object_key
from lineage_assets.conservation.archive_listing import OUTSIDE, Listing, rotation_note
from lineage_assets.conservation.archive_objects import (
    Figures,
    fact_checksum,
    fact_lines,
    heads,
    object_lines,
)
from lineage_assets.conservation.archive_run import ArchiveRun, Cut, take_cut
from lineage_assets.conservation.archive_values import archive_values, line_weigher
from lineage_assets.conservation.archive_walk import Placed, between, hole_text, offsets_of, walk
from lineage_assets.conservation.balance import HopBalance, OtherWriter
from lineage_assets.conservation.copy_dead_letters import DeadLetters, connect_source, foreign_writers
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.kafka_counts import PartitionCount
from lineage_assets.conservation.kafka_reads import oldest_stamp
from lineage_assets.conservation.stores import Stores


def object_lines_now(run: ArchiveRun, listing: Listing) -> tuple[dict[str, Figures], int, set[str]]:
    """(key -> figures of every object there now, objects read now, the sink's keys that were there and are gone).
    What the listing did not read stands as last listed (its shard is re-listed in rotation); the sink's keys
    found gone and the keys named as other writers are looked at every run."""
    counts, now = run.stores.counts, time.time()
    present = dict(listing.objects)
    suspects = {k for k in [*run.absent, *run.named_before] if k not in present and not listing.covers(k)}
    looked = heads(run.stores.s3, run.bucket, suspects, run.endpoint)
    present.update({k: etag for k, etag in looked.items() if etag is not None})
    gone = {k for k, etag in looked.items() if etag is None} | {k for k in run.absent if k not in present}
    standing: dict[str, str] = {}  # remembered keys this run did not list: they stand as last listed
    for key, fact in run.remembered.items():
        if key in present or key in gone:
            continue
        if listing.covers(key):
            gone.add(key)
        else:
            standing[key] = fact
    sink_keys = {k for k in gone if run.where(k).partition is not None}
    newly_gone = {k: json.dumps(now) for k in sink_keys if k not in run.absent}
    if newly_gone:
        counts.put_facts(run.absent_kind, newly_gone)
    back = [k for k in run.absent if k in present]  # (an absent key is gone unless present: never standing)
    if back:
        counts.drop_facts(run.absent_kind, back)
    dropped = [k for k in gone if k in run.remembered]
    if dropped:
        counts.drop_facts(run.objects_kind, dropped)
    figures, read_now = object_lines(
        run.stores.s3,
        run.bucket,
        present,
        run.remembered,
        lambda f: counts.put_facts(run.objects_kind, f),
        run.endpoint,
        line_weigher(run.fields) if run.fields else None,
    )
    figures.update((key, (fact_lines(fact), fact_checksum(fact))) for key, fact in standing.items())
    return figures, read_now, set(run.absent) | set(newly_gone) | set(dropped)


@dataclass
class Positions:
    """Record positions (committed records below an offset) of the cut, the end, object starts and dead letters."""

    counted: dict[tuple[int, int], PartitionCount]
    below: dict[str, int]
    origin: dict[int, int]
    ends: dict[int, int]

    def at(self, p: int, offset: int) -> int | None:
        """Records below ``offset`` (None: past the end at the cut)."""
        if offset >= self.ends[p]:
            return None
        known = self.below.get(f"{p}:{offset}")
        return known if known is not None else self.counted[(p, offset)].records


def positions_of(run: ArchiveRun, cut: Cut, lines: dict[str, int], dead: DeadLetters) -> Positions:
    """Every position the walk needs, from the remembered ones and the counter; the lasting ones remembered (the
    cut and the end move every run). Dead letters outside the counted range are dropped from ``dead``."""
    counts, partitions, committed = run.stores.counts, run.partitions, cut.committed
    below = {k: int(v) for k, v in counts.facts(run.below_kind).items()}
    targets: dict[int, set[int]] = {p: {committed[p], cut.ends[p]} for p in partitions}
    placed = [place for key in lines if (place := run.where(key)).partition is not None]  # 40,000 keys at 4M
    for place in placed:
        if f"{place.partition}:{place.start}" not in below:
            targets[place.partition].add(place.start)  # type: ignore[arg-type]
    for p, offsets in dead.sources.items():
        targets[p] |= {o for o in offsets if f"{p}:{o}" not in below and o < cut.ends[p]}
    counted = run.stores.kafka.count(run.topic, {p: sorted(t) for p, t in targets.items()})
    origin = {p: next(c.start for (q, _), c in counted.items() if q == p) for p in partitions}
    dead.sources = {p: {o for o in offsets if origin[p] <= o < cut.ends[p]} for p, offsets in dead.sources.items()}
    lasting = {(place.partition, place.start) for place in placed}
    lasting |= {(p, o) for p, offsets in dead.sources.items() for o in offsets}
    learned = {f"{p}:{t}": str(c.records) for (p, t), c in counted.items() if c.upto == t and (p, t) in lasting}
    counts.put_facts(run.below_kind, {k: v for k, v in learned.items() if k not in below})
    below.update({k: int(v) for k, v in learned.items()})
    return Positions(counted, below, origin, cut.ends)


@dataclass
class Walked:
    """The figures summed over the partitions, the writers named, and what the notes and range need."""

    in_: int = 0
    out: int = 0
    dead: int = 0
    pending: int = 0
    writers: list[OtherWriter] = field(default_factory=list)
    ranges: dict[str, Any] = field(default_factory=dict)
    first_pending: dict[int, int] = field(default_factory=dict)
    retained_out: list[str] = field(default_factory=list)


def walk_partitions(
    run: ArchiveRun, cut: Cut, lines: dict[str, int], dead: DeadLetters, pos: Positions, was_there: set[str]
) -> Walked:
    """Each partition's objects walked in record space: holes named missing, extra lines named, pending counted."""
    output, topic, committed = run.hop.output.qualified_name, run.topic, cut.committed
    found = Walked()
    by_partition: dict[int, list[Placed]] = {p: [] for p in run.partitions}
    for key, n in sorted(lines.items()):
        place = run.where(key)
        if place.partition is None:
            found.writers.append(OtherWriter(output, f"object {key} ({place.problem})", n, ref=f"object:{key}"))
            found.out += n
        elif place.start < pos.origin[place.partition]:  # type: ignore[operator]
            found.retained_out.append(key)  # its records were deleted by retention before counting began
        else:
            at = pos.at(place.partition, place.start)  # type: ignore[arg-type]
            end_pos = pos.counted[(place.partition, cut.ends[place.partition])].records
            by_partition[place.partition].append(Placed(key, end_pos if at is None else at, n))
            found.out += n
    for p in run.partitions:
        e, c = pos.counted[(p, cut.ends[p])].records, pos.counted[(p, committed[p])].records
        dead_positions = sorted(d for d in (pos.at(p, o) for o in dead.sources[p]) if d is not None)
        walked = walk(by_partition[p], dead_positions, c, e)
        found.in_, found.dead, found.pending = found.in_ + e, found.dead + walked.dead, found.pending + walked.pending
        anchors = {pos.origin[p]: 0, committed[p]: c, cut.ends[p]: e}
        anchors |= {
            o: pos.below[f"{p}:{o}"] for o in [*dead.sources[p], *run.known_starts[p]] if f"{p}:{o}" in pos.below
        }
        for placed in by_partition[p]:
            start = run.where(placed.key).start
            if start is not None and start < cut.ends[p]:
                anchors[start] = placed.start
        for key, extra in sorted(walked.extra.items()):
            start = run.where(key).start
            reason = (
                f"start offset {start} is past the end {cut.ends[p]} of partition {p}"
                if start is not None and start >= cut.ends[p]
                else f"its records are already held by object {walked.overlaps[key]}"
                if key in walked.overlaps
                else "its records are already held by another object"
            )
            found.writers.append(OtherWriter(output, f"object {key} ({reason})", extra, ref=f"object:{key}"))
        for a, b in walked.missing:
            lost = b - a - between(dead_positions, a, b)
            key_at = functools.partial(object_key, run.prefix, topic, p)
            what, first, last = hole_text(p, a, b, lost, anchors, key_at, was_there - lines.keys())
            found.writers.append(OtherWriter(output, what, -lost, ref=f"offsets:{topic}[{p}]:{first}..{last}"))
        if walked.first_pending is not None:
            first, _, exact = offsets_of(walked.first_pending, walked.first_pending + 1, anchors)
            found.first_pending[p] = first if exact else committed[p]
        found.ranges[str(p)] = {
            "from": pos.origin[p],
            "committed": committed[p],
            "end": cut.ends[p],
            "objects": len(by_partition[p]),
        }
    return found


def remember_listing(run: ArchiveRun, cut: Cut, named_now: set[str]) -> str:
    """What was listed when, the floor of the shards listed every run and the keys named (as other writers or with
    values that differ: looked at every run until they are not), for the next run; the note on what this run
    verified."""
    counts, now = run.stores.counts, time.time()
    listed_now: dict[str, str] = {}
    if run.stores.deep:
        listed_now = {f"{p}:{unit}": json.dumps(now) for p in run.partitions for unit in ("", OUTSIDE)}
    for p, plan in cut.listing.plans.items():
        listed_now |= {f"{p}:{shard}": json.dumps(now) for shard in plan.listed}
        if plan.outside:
            listed_now[f"{p}:{OUTSIDE}"] = json.dumps(now)
    counts.put_facts(run.verified_kind, listed_now)
    verified = run.verified | {k: now for k in listed_now}
    counts.put_facts(run.floors_kind, {str(p): str(o) for p, o in cut.committed.items()})
    if set(run.named_before) - named_now:
        counts.drop_facts(run.named_kind, sorted(set(run.named_before) - named_now))
    counts.put_facts(run.named_kind, {k: json.dumps(now) for k in named_now if k not in run.named_before})
    return rotation_note(cut.listing, verified, now, run.stores.deep)


def notes_of(
    run: ArchiveRun,
    cut: Cut,
    lines: dict[str, int],
    read_now: int,
    dead: DeadLetters,
    walked: Walked,
    verification: str,
) -> list[str]:
    """What the figures mean at this reading, one line each."""
    dlq_name = run.hop.dead_letters.name if run.hop.dead_letters else "no dead-letter topic"
    listing, topic = cut.listing, run.topic
    notes = [
        f"cut: the sink's committed offsets (group {run.group}: {run.group_from}) read before the listing and again "
        f"after it ({cut.tries} tries: retried while they moved); the ones read before are used: an object holding "
        "records below them was uploaded before they were committed, so the listing has it. The end offsets are read "
        "after the listing, so every listed record lies below them.",
        f"in: committed records of {topic} from the first counted offset up to the end at the cut (read_committed, "
        "counted once, remembered as marks); pending: those at or above the committed offsets that no object holds "
        "yet (the sink's buffers), so in - pending = what the sink has committed plus objects uploaded whose commit "
        "was not yet seen.",
        f"out: JSON lines of the {len(lines)} objects under s3://{run.bucket}/{run.prefix}; {read_now} read now (new "
        "or changed ETag), the others remembered by key and ETag.",
        f"listing: {listing.calls} calls, {listing.seconds:.2f} s ({listing.how}).",
        verification,
        f"dead letters: distinct records of {topic} below the committed offsets that {dlq_name} "
        "holds (its __connect.errors.* headers, scanned incrementally); dead letters at or above them are pending"
        + (f"; {len(dead.again)} dead-lettered again (counted once)" if dead.again else "")
        + (
            f"; {dead.foreign.records} without a source in {topic}: another producer's, counted and named per batch"
            if dead.foreign.records
            else ""
        ),
        "objects are placed by the records below their start offset; a hole in the chain of objects that no dead "
        "letter explains is named missing, an object inside another's records, past the end, off the layout or in "
        "another partition's folder is named with its extra lines. Tombstones (skipped without a line or a dead "
        "letter) would show as missing: the orders topic has none.",
    ]
    if walked.retained_out:
        notes.append(
            f"{len(walked.retained_out)} objects start below the first counted offset (retention deleted those "
            "records before counting began): not counted"
        )
    return notes


def values_note(run: ArchiveRun) -> tuple[str, ...]:
    if not run.fields:
        return ()
    return (
        f"values: the checksum of the copied columns ({', '.join(f.output for f in run.fields)}) of each object's "
        f"lines against that of the records of {run.topic} it holds from its start offset (the dead letters' "
        "records left out), remembered per object; objects named above are left out",
    )


def balance(hop: Hop, stores: Stores) -> HopBalance:
    """The hop's balance at the cut of the sink's committed offsets (see the module doc and the notes)."""
    first_ends = {p: end for p, (_, end) in stores.kafka.offsets(hop.input.name).items()}
    run = ArchiveRun(hop, stores, sorted(first_ends), first_ends)
    cut = take_cut(run)
    figures, read_now, was_there = object_lines_now(run, cut.listing)
    lines = {key: n for key, (n, _) in figures.items()}
    dead = copy_dead_letters.read(
        stores, hop, connect_source, (run.dead_kind, f"archive/{run.job}/dlq"), run.partitions
    )
    pos = positions_of(run, cut, lines, dead)
    walked = walk_partitions(run, cut, lines, dead, pos, was_there)
    named = {w.reference.removeprefix("object:") for w in walked.writers if w.reference.startswith("object:")}
    values, differing = archive_values(run, cut, figures, dead.sources, named | set(walked.retained_out))
    verification = remember_listing(run, cut, named | differing)
    return HopBalance(
        job=run.job,
        input=hop.input.qualified_name,
        outputs=hop.output_names,
        in_=walked.in_,
        out=walked.out,
        dead_letters=walked.dead + dead.foreign.rows,
        pending=walked.pending,
        range={"topic": run.topic, "archive": f"s3://{run.bucket}/{run.prefix}", "partitions": walked.ranges},
        other_writers=(*walked.writers, *foreign_writers(hop, dead)),
        pending_since=oldest_stamp(stores, run.topic, walked.first_pending) if walked.pending else None,
        notes=tuple(notes_of(run, cut, lines, read_now, dead, walked, verification)) + values_note(run),
        values=values,
    )
