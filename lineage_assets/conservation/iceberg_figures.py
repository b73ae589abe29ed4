"""iceberg-ingestion's balance from what was read at the cut (pure): the figures, the other writers named oldest
first (snapshots not written by the job, history resets, DLQ records that are no dead letter), and the notes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from lineage_assets.conservation.balance import HopBalance, OtherWriter
from lineage_assets.conservation.copy_dead_letters import DeadLetters, foreign_writers
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.iceberg_snapshots import (
    HistoryReset,
    SnapshotFact,
    other_writer,
)
from lineage_assets.conservation.values import CHECKSUM, ValueBalance


@dataclass(frozen=True)
class Figures:
    """What was read at the cut, for ``assemble``."""

    below_end: int  # committed input records below the LSO at the cut
    below_committed: int  # ... below the group's committed offsets
    head: SnapshotFact | None
    held: int | None  # rows the table holds now (None: unknown, see held_unknown)
    held_unknown: str
    chain: list[SnapshotFact]
    chain_break: int | None
    resets: list[HistoryReset]
    dead: DeadLetters
    range: dict[str, Any]
    cut: str = ""
    notes: tuple[str, ...] = ()
    pending_since: float | None = None
    values: tuple[ValueBalance, ...] = ()
    #: snapshot id -> the checksum it changed by (an other writer's claim, taken out when it is accepted)
    nets: dict[int, int] = field(default_factory=dict)
    #: the group's committed offsets C at the cut, which the dead letters are read against
    committed: dict[int, int] = field(default_factory=dict)


def claiming(writer: OtherWriter, net: int | None) -> OtherWriter:
    return writer if net is None else replace(writer, claimed=((CHECKSUM, net),))


def assemble(hop: Hop, fig: Figures) -> HopBalance:
    """The hop's balance from the figures: arithmetic and naming only."""
    output = hop.output.qualified_name
    writers = [claiming(w, fig.nets.get(f.snapshot_id)) for f in fig.chain if (w := other_writer(output, f))]
    writers.reverse()  # oldest first: the order they happened
    writers += [OtherWriter(output, r.describe(), r.rows, f"reset:{r.old_head}->{r.new_head}") for r in fig.resets]
    writers += foreign_writers(hop, fig.dead)
    flink_rows = sum(f.net for f in fig.chain if f.by_flink)
    others = sum(f.net for f in fig.chain if not f.by_flink)
    rewrites = [f.snapshot_id for f in fig.chain if f.is_rewrite]
    notes = [
        "cut: " + fig.cut,
        f"in: committed records of {hop.input.name} below its last stable offsets; pending: those at or above the "
        f"group's committed offsets (read by the job, not yet committed by a checkpoint)",
        f"out: rows of {hop.output.name} at snapshot {fig.head.snapshot_id if fig.head else 'none'} from its summary "
        f"(total-records less position deletes, no data read); the job's snapshots in its history add {flink_rows}, "
        f"other writers {others:+d}",
        f"dead letters: records of {hop.dead_letters.name if hop.dead_letters else 'the DLQ'} whose source offset is "
        f"below the committed offsets ({fig.dead.ahead(fig.committed)} more are ahead of them, counted with pending)",
        "counts of Kafka are remembered as marks and the snapshots as facts, so they hold after retention or "
        "snapshot expiry; a run reads only new records and snapshots",
    ]
    if rewrites:
        notes.append(f"compactions (same rows, other files) not named: snapshots {rewrites}")
    if fig.chain_break is not None:
        notes.append(
            f"history before snapshot {fig.chain_break} was expired before it was classified: other writers before "
            "it are not named (their rows are in the total)"
        )
    notes += list(fig.notes)
    balance = HopBalance(
        job=hop.job.name,
        input=hop.input.qualified_name,
        outputs=hop.output_names,
        in_=fig.below_end,
        out=fig.held,
        # exactly-once: a dead letter written again is the job's duplicate, so each counts
        dead_letters=fig.dead.below(fig.committed, repeats=True) + fig.dead.foreign.rows,
        pending=fig.below_end - fig.below_committed,
        range=fig.range,
        other_writers=tuple(writers),
        pending_since=fig.pending_since if fig.below_end > fig.below_committed else None,
        notes=tuple(notes),
        values=fig.values,
    )
    if fig.held is None:
        return balance.unknown_because(
            f"the rows of {hop.output.name} are not known at its current snapshot: {fig.held_unknown}"
        )
    return balance
