"""The iceberg-ingestion hop: Kafka ``orders`` -> Iceberg ``default.orders``, bad records -> ``orders-dlq-flink``.

The job commits three things when a checkpoint completes, each on its own: the Iceberg snapshot of the checkpoint's
rows, the Kafka transaction of its dead letters, and the source's offsets (to its consumer group). So the hop is read
at a cut where none of the three moves between two looks 1.5 s apart; one look stands alone when the offsets held
still around it, nothing was pending (no checkpoint had anything to commit) and the figures balance but for the
other writers named (an idle stream: no wait). Every figure comes from what the stores keep anyway:

- ``in``: committed records of ``orders`` below the last stable offsets read at the cut (``KafkaCounter.count``,
  incremental from remembered marks); ``pending``: the part of them at or above the group's committed offsets C (the
  job has read or will read them, but no checkpoint has committed them). So ``in - pending`` is what lies below C.
- ``out``: the rows the table holds now, from the current snapshot's summary (``total-records`` less position
  deletes): no data file is read. Every snapshot of the current snapshot's ancestry is classified once (remembered as
  facts): written by the Flink job (its summary carries ``flink.job-id``) or by another writer, whose net row change
  is named as an ``OtherWriter``. A ``replace`` snapshot (a compaction: the same rows in other files) is not named.
- ``dead_letters``: the DLQ records whose source offset lies below C (``copy_dead_letters``: only the DLQ records
  not seen before are read; its records carry ``src_partition``/``src_offset``), so a DLQ transaction that commits
  before the offsets do cannot count a record twice (once dead, once pending). DLQ records that are no dead letter
  of the input (another producer's) are counted too, like every hop's other writers (``HopBalance``), and named per
  batch (figure ``dead_letters``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from lineage_assets.conservation import copy_dead_letters
from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.copy_dead_letters import DeadLetters, flink_source
from lineage_assets.conservation.foreign_records import ForeignRecords
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.iceberg_figures import Figures, assemble
from lineage_assets.conservation.iceberg_snapshots import (
    HistoryReset,
    SnapshotFact,
    ancestry,
    classify,
    history_reset,
    rows_held,
)
from lineage_assets.conservation.iceberg_values import iceberg_values
from lineage_assets.conservation.kafka_reads import oldest_stamp
from lineage_assets.conservation.stores import Stores

#: facts (CountStore) this reader keeps under the job's name: one per snapshot classified, the last head seen and
#: the history resets found (both per table UUID: a table dropped and created again starts a history of its own),
#: and one per DLQ record (its source); the incremental DLQ scan (``KafkaCounter.scan``) is named like the tally of
#: dead letters kept before (one fact per DLQ, read as it was left)
SNAPSHOT_FACTS = "{job}/snapshots"
HISTORY_FACTS = "{job}/history"
SOURCE_FACTS = "{job}/dead-letter-sources"
TALLY_FACTS = "{job}/dead-letters"
#: looks at the three commit points before the last one is used even though something moved
CUT_ATTEMPTS = 6
CUT_PAUSE_S = 1.5


@dataclass(frozen=True)
class Look:
    committed: dict[int, int]
    head: int | None
    dlq_end: dict[int, int]
    end: dict[int, int]
    table: Any

    def key(self) -> tuple:
        return (tuple(sorted(self.committed.items())), self.head, tuple(sorted(self.dlq_end.items())))


def _look(stores: Stores, hop: Hop, group: str, table_name: str, partitions: list[int]) -> tuple[Look, bool]:
    """One look at the three commit points: (the look, whether C stayed the same around it)."""
    topic = hop.input.name
    before = stores.kafka.committed(topic, group, partitions)
    table = stores.table(table_name)
    snapshot = table.current_snapshot()
    dlq_end = {p: e for p, (_, e) in stores.kafka.offsets(hop.dead_letters.name).items()} if hop.dead_letters else {}
    end = {p: e for p, (_, e) in stores.kafka.offsets(topic).items()}
    after = stores.kafka.committed(topic, group, partitions)
    look = Look(after, snapshot.snapshot_id if snapshot else None, dlq_end, end, table)
    return look, before == after


def take_cut(
    look: Callable[[], tuple[Look, bool]],
    attempts: int = CUT_ATTEMPTS,
    pause: float = CUT_PAUSE_S,
    sleep: Callable[[float], None] = time.sleep,
    previous: Look | None = None,
) -> tuple[Look, str]:
    """Look until C held still around a look and the committed offsets, the current snapshot and the DLQ end are
    the same as at the look before (the job commits the three one after another when a checkpoint completes):
    (the last look, how the cut was taken). ``previous``: a look already taken, the first compared with."""
    if previous is not None:
        sleep(pause)
    for i in range(1, attempts + 1):
        current, still = look()
        if still and previous is not None and previous.key() == current.key():
            return current, f"stable over two looks {pause:g} s apart (look {i} of at most {attempts})"
        previous = current
        if i < attempts:
            sleep(pause)
    return previous, (  # type: ignore[return-value]
        f"NOT stable: the committed offsets, the snapshot or the DLQ moved in each of {attempts} looks; "
        "the figures are those of the last look (reconcile reads a lost or doubled hop again)"
    )


def _classify_new(table, head: int | None, facts: dict[int, SnapshotFact]) -> dict[int, SnapshotFact]:
    """Facts of the current snapshot's ancestors not classified before, read from the table's metadata."""
    new: dict[int, SnapshotFact] = {}
    current = head
    while current is not None and current not in facts and current not in new:
        snapshot = table.snapshot_by_id(current)
        if snapshot is None:  # expired before it was classified
            break
        summary = snapshot.summary
        props = dict(summary.additional_properties) if summary is not None else {}
        operation = summary.operation.value if summary is not None else "unknown"
        fact = classify(snapshot.snapshot_id, snapshot.parent_snapshot_id, snapshot.timestamp_ms, operation, props)
        new[current] = fact
        current = fact.parent_id
    return new


def _snapshot_facts(stores: Stores, kind: str) -> dict[int, SnapshotFact]:
    return {int(k): SnapshotFact.from_json(v) for k, v in stores.counts.facts(kind).items()}


def _dead_letters(stores: Stores, hop: Hop, partitions: list[int]) -> DeadLetters:
    """The DLQ's records by source (``copy_dead_letters``). A tally this reader kept before carries on as it was:
    its counts below C, its sources ahead of C and its foreign batches, the scan going on from where it stopped."""
    job = hop.job.name
    kinds = (SOURCE_FACTS.format(job=job), TALLY_FACTS.format(job=job))  # the scan keeps the tally's name
    dlq = hop.dead_letters.name if hop.dead_letters else ""
    old = stores.counts.facts(kinds[1]).get(dlq) if dlq else None
    tally = json.loads(old) if old else {}
    if tally and not stores.counts.facts(kinds[0]):  # (no record scanned since: it goes on from the tally)
        for partition, offset in tally["tallied"].items():
            stores.counts.set_scan_position(kinds[1], dlq, int(partition), offset)
    dead = copy_dead_letters.read(stores, hop, flink_source, kinds, partitions)
    dead.carried = {int(p): n for p, n in tally.get("below", {}).items()}
    for partition, offsets in tally.get("ahead", {}).items():
        dead.sources.setdefault(int(partition), set()).update(offsets)
    dead.foreign.batches[:0] = ForeignRecords.from_json(dlq, tally.get("foreign_batches")).batches
    return dead


ONE_LOOK = (
    "one look: C held still around it, nothing was pending (no record between C and the end offsets, so no "
    "checkpoint had anything to commit) and the figures balance but for the other writers named; a second look "
    f"{CUT_PAUSE_S:g} s later is taken only when one of these fails"
)


def settled(found: HopBalance, output: str) -> bool:
    """Whether one look's balance needs no second look: nothing pending (the job had nothing in flight to commit)
    and no difference but what the other writers named explain, in the table or the DLQ (a look that fell between
    the job's three commits shows as a difference no writer explains)."""
    if not found.known or found.pending != 0 or found.difference is None:
        return False
    by_others = sum(w.rows for w in found.other_writers)
    return found.difference == -by_others


def balance(hop: Hop, stores: Stores) -> HopBalance:
    """The hop's balance at a stable cut of its three commit points (see the module doc): one look when it shows
    nothing in flight and balances, else looks until two agree."""
    table_name = hop.output.table_name
    group, group_from = stores.consumer_group(hop.job.name)
    partitions = sorted(stores.kafka.offsets(hop.input.name))
    first, still = _look(stores, hop, group, table_name, partitions)
    if still:
        # (the age of what is pending is not read: one look stands only when nothing is)
        found = _balance_at(hop, stores, first, ONE_LOOK, group, group_from, partitions, pending_age=False)
        if settled(found, hop.output.qualified_name):
            return found
    look, how = take_cut(lambda: _look(stores, hop, group, table_name, partitions), previous=first)
    return _balance_at(hop, stores, look, how, group, group_from, partitions)


def table_rows(
    stores: Stores, job_name: str, look: Look
) -> tuple[SnapshotFact | None, int | None, str, list[SnapshotFact], int | None, list[HistoryReset]]:
    """out: the snapshots not seen before classified, the remembered ancestry walked, history resets found; (the
    head's fact, the rows it holds or None with why not, the chain, where it breaks, the resets)."""
    # out: classify the snapshots not seen before, then walk the remembered ancestry
    table_uuid = str(look.table.metadata.table_uuid)
    snapshot_kind = f"{SNAPSHOT_FACTS.format(job=job_name)}/{table_uuid}"
    history_kind = f"{HISTORY_FACTS.format(job=job_name)}/{table_uuid}"
    facts = _snapshot_facts(stores, snapshot_kind)
    new = _classify_new(look.table, look.head, facts)
    if new:
        stores.counts.put_facts(snapshot_kind, {str(k): v.to_json() for k, v in new.items()})
        facts.update(new)
    chain, chain_break = ancestry(look.head, facts)
    history = stores.counts.facts(history_kind)
    resets = [HistoryReset(**json.loads(v)) for k, v in history.items() if k.startswith("reset:")]
    old_head = json.loads(history["head"]) if "head" in history else None
    reset = history_reset(old_head, chain, facts, int(time.time() * 1000))
    if reset is not None:
        resets.append(reset)
        history[f"reset:{reset.old_head}"] = json.dumps(asdict(reset))
    if look.head is not None:
        history["head"] = json.dumps(look.head)
    stores.counts.put_facts(history_kind, history)
    if look.head is None:
        held, held_unknown = 0, ""
        head_fact = None
    else:
        snapshot = look.table.snapshot_by_id(look.head)
        held, held_unknown = rows_held(dict(snapshot.summary.additional_properties) if snapshot.summary else {})
        head_fact = facts.get(look.head)
    return head_fact, held, held_unknown, chain, chain_break, resets


def _balance_at(
    hop: Hop,
    stores: Stores,
    look: Look,
    how: str,
    group: str,
    group_from: str,
    partitions: list[int],
    pending_age: bool = True,
) -> HopBalance:
    """The balance at the cut of ``look``; ``pending_age``: read the oldest pending record's time."""
    topic = hop.input.name
    committed = {p: max(c, 0) for p, c in look.committed.items()}  # no commit yet (-1001): nothing below C

    head_fact, held, held_unknown, chain, chain_break, resets = table_rows(stores, hop.job.name, look)

    # in and pending: one incremental read per partition up to both targets
    targets = {p: [committed[p], look.end[p]] for p in partitions}
    counted = stores.kafka.count(topic, targets)
    below_end = sum(counted[(p, look.end[p])].records for p in partitions)
    below_committed = sum(counted[(p, committed[p])].records for p in partitions)
    starts = {
        p: committed[p] for p in partitions if counted[(p, look.end[p])].records > counted[(p, committed[p])].records
    }

    dead = _dead_letters(stores, hop, partitions)
    checkpoint = next((f.checkpoint for f in chain if f.by_flink and f.checkpoint is not None), None)
    rng: dict[str, Any] = {
        f"{topic} offsets": {p: [counted[(p, look.end[p])].start, look.end[p]] for p in partitions},
        "committed offsets": committed,
        "group": group,
        "snapshot": look.head,
        "checkpoint": checkpoint,
        f"{hop.dead_letters.name if hop.dead_letters else 'dlq'} offsets": dead.scanned,
    }
    notes = [f"group {group} ({group_from})"]
    uncounted = {p: c.uncounted_before for p in partitions if (c := counted[(p, look.end[p])]).uncounted_before}
    if uncounted:
        notes.append(
            f"{topic}: offsets below {uncounted} (partition: offset) were deleted by retention before the first "
            "count; rows the table holds from them show as duplicates"
        )
    values, nets = iceberg_values(hop, stores, look, chain, chain_break, counted)
    figures = Figures(
        below_end=below_end,
        below_committed=below_committed,
        head=head_fact,
        held=held,
        held_unknown=held_unknown,
        chain=chain,
        chain_break=chain_break,
        resets=resets,
        dead=dead,
        range=rng,
        cut=f"the group's offsets C, then the current snapshot, the DLQ end and the LSO, then C again; {how}",
        notes=tuple(notes),
        pending_since=oldest_stamp(stores, topic, starts) if pending_age else None,
        values=values,
        nets=nets,
        committed=committed,
    )
    return assemble(hop, figures)
