"""iceberg-ingestion's values: the checksum of the copied columns (checksums.py) at the hop's cut.

- ``in``: the weights of the committed orders below the last stable offsets, ``pending`` those at or above the
  group's committed offsets (``KafkaCounter.sum``: remembered marks, each order decoded once);
- ``dead_letters``: the weights of the raw orders the dead letters carry (marks as well);
- ``out``: the weights of the rows the table holds, summed over the current snapshot's ancestry: each snapshot
  adds the weights of the data files it added and takes those of the files it removed. A snapshot is weighed once
  (its own manifests, and the data files it added, read once) and remembered by id; a file's weight is remembered
  by its path (files never change), so a file a compaction removes is not read again.

A difference is placed on the snapshots of other writers that changed the checksum (an overwrite of a price keeps
every count), else on the job's snapshots since the last reading that balanced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lineage_assets.conservation import acceptances
from lineage_assets.conservation.avro_values import AvroValues
from lineage_assets.conservation.checksums import Field, copied_fields, measure_of, source_text, weigh
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.iceberg_snapshots import SnapshotFact
from lineage_assets.conservation.kafka_reads import weighed_orders
from lineage_assets.conservation.stores import Stores
from lineage_assets.conservation.values import CHECKSUM, ValueBalance

#: the snapshots a difference names at most
NAMED = 10
_ADDED, _DELETED = 1, 2  # manifest entry status
_DATA = 0  # data file content


class Unweighable(Exception):
    """A snapshot whose weights cannot be read (delete files, files gone): the values are unknown."""


@dataclass(frozen=True)
class SnapshotWeight:
    added: int
    removed: int

    @property
    def net(self) -> int:
        return self.added - self.removed


def file_weight(table: Any, path: str, fields: tuple[Field, ...]) -> int:
    """The summed weights of a data file's rows (its copied columns read, nothing else)."""
    import pyarrow.parquet as pq

    with table.io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        names = [f.output for f in fields if f.output in parquet.schema_arrow.names]
        rows = parquet.read(columns=names).to_pylist()
    return sum(weigh(row, fields, "output") for row in rows)


def snapshot_weight(table: Any, snapshot_id: int, fields: tuple[Field, ...], files: dict[str, int]) -> SnapshotWeight:
    """What one snapshot added and removed, from its own manifests; ``files``: path -> weight, read and extended."""
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise Unweighable(f"snapshot {snapshot_id} was expired before it was weighed")
    added = removed = 0
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot_id:
            continue  # a manifest the snapshot kept: its entries were added or removed before
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            status, data = int(entry.status), entry.data_file
            # in a manifest the snapshot wrote, a DELETED entry is its removal (pyiceberg keeps the adding
            # snapshot's id on it), an ADDED one its addition (a writer that merges manifests keeps older additions
            # as ADDED under their own snapshot's id)
            if (status == _ADDED and entry.snapshot_id not in (None, snapshot_id)) or status not in (_ADDED, _DELETED):
                continue
            if int(data.content) != _DATA:
                raise Unweighable(f"snapshot {snapshot_id} writes delete files: rows are deleted by position or value")
            if data.file_path not in files:
                try:
                    files[data.file_path] = file_weight(table, data.file_path, fields)
                except (OSError, ValueError) as exc:
                    raise Unweighable(f"data file {data.file_path} of snapshot {snapshot_id}: {exc}") from exc
            if status == _ADDED:
                added += files[data.file_path]
            else:
                removed += files[data.file_path]
    return SnapshotWeight(added, removed)


def table_weights(
    stores: Stores, job_name: str, table: Any, chain: list[SnapshotFact], fields
) -> dict[int, SnapshotWeight]:
    """snapshot id -> its weights, for the chain: remembered, or read now for the snapshots new since."""
    kind = f"{job_name}/weights/{table.metadata.table_uuid}"
    remembered = stores.counts.facts(kind)
    found = {int(k): SnapshotWeight(**json.loads(v)) for k, v in remembered.items() if not k.startswith("file:")}
    files = {k.removeprefix("file:"): int(v) for k, v in remembered.items() if k.startswith("file:")}
    known = set(files)
    learned: dict[str, str] = {}
    for fact in reversed(chain):  # oldest first
        if fact.snapshot_id not in found:
            weight = snapshot_weight(table, fact.snapshot_id, fields, files)
            found[fact.snapshot_id] = weight
            learned[str(fact.snapshot_id)] = json.dumps({"added": weight.added, "removed": weight.removed})
    learned |= {f"file:{path}": str(w) for path, w in files.items() if path not in known}
    if learned:
        stores.counts.put_facts(kind, learned)
    return found


def where_of(
    chain: list[SnapshotFact], weights: dict[int, SnapshotWeight], since: int | None, accepted: set[str]
) -> tuple[str, ...]:
    """The snapshots a difference is in: other writers' that changed the checksum (not accepted), else the job's
    newer than the last balanced head (``since``)."""
    others = [
        f
        for f in chain
        if not f.by_flink
        and weights[f.snapshot_id].net
        and not f.is_rewrite
        and f"snapshot:{f.snapshot_id}" not in accepted
    ]
    if others:
        found = [f"{f.describe()} changed it by {weights[f.snapshot_id].net:+d}" for f in reversed(others)]
    else:
        newer = []
        for f in chain:
            if f.snapshot_id == since:
                break
            newer.append(f)
        scope = "since the last reading that balanced" if since is not None else "(no reading balanced before)"
        found = [f"the job's {len(newer)} snapshots {scope}: " + ", ".join(str(f.snapshot_id) for f in newer[:NAMED])]
    return tuple(found[:NAMED])


Weighed = tuple[tuple[ValueBalance, ...], dict[int, int]]


def iceberg_values(
    hop: Hop, stores: Stores, look: Any, chain: list[SnapshotFact], chain_break: int | None, counted: dict
) -> Weighed:
    """(the checksum's balance at the cut of ``look``, none when the hop copies no column; snapshot id -> the
    checksum it changed by, what its writer claims). ``counted``: the input's counts at the cut, whose start the
    sums must share."""
    fields = copied_fields(hop)
    if not fields:
        return (), {}

    def unknown(why: str) -> Weighed:
        return (ValueBalance(CHECKSUM, source_text(fields), places=0, unknown=why),), {}

    if chain_break is not None:
        return unknown(f"the history before snapshot {chain_break} was expired before it was weighed")
    avro = AvroValues(stores.resources.kafka.registry())
    measure = measure_of(fields)
    committed = {p: max(c, 0) for p, c in look.committed.items()}
    ins, dead, late = weighed_orders(
        stores,
        hop,
        avro,
        measure,
        lambda order: weigh(order, fields, "input"),
        {p: [committed[p], e] for p, e in look.end.items()},
        look.dlq_end,
        counted,
    )
    if late:
        return unknown(
            f"{hop.input.name} partitions {late}: records were deleted by retention before they were weighed"
        )
    try:
        weights = table_weights(stores, hop.job.name, look.table, chain, fields)
    except Unweighable as exc:
        return unknown(str(exc))
    except Exception as exc:  # the files' store failing leaves the values unknown, never the counts read before
        why = f"reading the table's files failed ({type(exc).__name__}: {exc}); reconcile again once they answer"
        return unknown(why)
    in_ = sum(ins[(p, e)].total for p, e in look.end.items())
    pending = in_ - sum(ins[(p, c)].total for p, c in committed.items())
    out = sum(weights[f.snapshot_id].net for f in chain)
    kind = f"{hop.job.name}/balanced-at/{look.table.metadata.table_uuid}"
    since = stores.counts.facts(kind).get("head")
    found = ValueBalance(CHECKSUM, source_text(fields), in_, out, dead, pending, places=0)
    if found.differs:
        found = ValueBalance(
            CHECKSUM,
            source_text(fields),
            in_,
            out,
            dead,
            pending,
            where=where_of(
                chain, weights, int(since) if since else None, set(acceptances.covered(stores.counts, hop.job.name))
            ),
            places=0,
        )
    elif look.head is not None:
        stores.counts.put_facts(kind, {"head": str(look.head)})
    return (found,), {sid: w.net for sid, w in weights.items()}
