"""One reconciliation of the archive hop: where the archive is, what earlier runs remembered (the facts' kinds), the
places of its keys, and the cut: the sink's committed offsets read before and after the listing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lineage_assets.conservation.archive_keys import (
    EXTENSION,
    OFFSET_DIGITS,
    KeyPlace,
    object_key,
    place_of,
    sink_place,
)
from lineage_assets.conservation.archive_listing import Listing, list_archive
from lineage_assets.conservation.checksums import copied_fields
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


@dataclass
class ArchiveRun:
    """One reconciliation of the hop: where the archive is, what earlier runs remembered, the places of the keys."""

    hop: Hop
    stores: Stores
    partitions: list[int]
    first_ends: dict[int, int]
    places: dict[str, KeyPlace] = field(default_factory=dict)

    def __post_init__(self) -> None:
        job, topic = self.job, self.topic
        self.bucket = self.hop.output.namespace.removeprefix("s3://")
        self.prefix = self.hop.output.name.strip("/") + "/"
        self.group, self.group_from = self.stores.consumer_group(job)
        self.endpoint = str(getattr(self.stores.s3.meta, "endpoint_url", "the object store"))
        self.fields = copied_fields(self.hop)
        self.objects_kind, self.dead_kind, self.below_kind = kinds(job)
        self.verified_kind, self.floors_kind, self.absent_kind, self.named_kind = listing_kinds(job)
        counts = self.stores.counts
        self.remembered = counts.facts(self.objects_kind)  # JSON text: decoded only for the keys listed this run
        self.verified = {k: float(v) for k, v in counts.facts(self.verified_kind).items()}
        self.last_floors = {int(k): int(v) for k, v in counts.facts(self.floors_kind).items()}
        self.absent, self.named_before = counts.facts(self.absent_kind), counts.facts(self.named_kind)
        self.sink_heads = {
            object_key(self.prefix, topic, p, 0)[: -OFFSET_DIGITS - len(EXTENSION)]: p for p in self.partitions
        }
        starts: dict[int, list[int]] = {p: [] for p in self.partitions}
        for key in self.remembered:
            place = self.where(key)
            if place.partition is not None:
                starts[place.partition].append(place.start)  # type: ignore[arg-type]
        self.known_starts = {p: sorted(s) for p, s in starts.items()}

    @property
    def job(self) -> str:
        return self.hop.job.name

    @property
    def topic(self) -> str:
        return self.hop.input.name

    def where(self, key: str) -> KeyPlace:
        """``place_of``, once per key (a run places every remembered and listed key); the sink's own keys by
        slicing (``sink_place``), the rest by the layout's patterns."""
        place = self.places.get(key)
        if place is None:
            place = self.places[key] = sink_place(key, self.sink_heads) or place_of(
                key, self.prefix, self.topic, self.partitions
            )
        return place


@dataclass
class Cut:
    """The sink's committed offsets read before the listing (``before``), the listing, the ends after it."""

    before: dict[int, int]
    listing: Listing
    tries: int
    ends: dict[int, int]

    @property
    def committed(self) -> dict[int, int]:
        return {p: max(o, 0) for p, o in self.before.items()}


def take_cut(run: ArchiveRun) -> Cut:
    """C before the listing, E after it; listed again while the sink committed during the listing."""
    kafka, tries = run.stores.kafka, 0
    while True:
        tries += 1
        before = kafka.committed(run.topic, run.group, run.partitions)
        upper = {
            p: max([run.first_ends[p], before[p], *(s + 1 for s in run.known_starts[p][-1:])]) for p in run.partitions
        }
        floors = None
        if all(p in run.last_floors for p in run.partitions):
            floors = {p: min(run.last_floors[p], max(before[p], 0)) for p in run.partitions}
        listing = list_archive(
            run.stores.s3,
            run.bucket,
            run.prefix,
            run.topic,
            run.known_starts,
            upper,
            run.endpoint,
            run.stores.deep,
            floors,
            run.verified,
        )
        after = kafka.committed(run.topic, run.group, run.partitions)
        if after == before or tries >= CUT_TRIES:
            break
        time.sleep(0.5)
    return Cut(before, listing, tries, {p: end for p, (_, end) in kafka.offsets(run.topic).items()})
