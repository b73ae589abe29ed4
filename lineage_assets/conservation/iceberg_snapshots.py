"""Iceberg ``default.orders``' snapshots, classified from their summaries alone (pure): written by the Flink job
(``flink.job-id`` in the summary) or by another writer, whose net row change is named; a compaction names nothing;
the rows a snapshot holds from ``total-records`` less position deletes; the ancestry walked back, a history reset
(a table dropped and created again) found."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from lineage_assets.conservation.balance import OtherWriter

FLINK_KEYS = ("flink.job-id", "flink.operator-id")


def summary_int(summary: Mapping[str, str], key: str) -> int:
    value = summary.get(key)
    return int(value) if value not in (None, "") else 0


def net_rows(summary: Mapping[str, str]) -> int:
    """Rows a snapshot added to what the table holds: records added less records removed (with the files they
    were in), less positions newly deleted plus positions whose delete files went away (a compaction applying
    position deletes removes as many of them as it drops records: net 0)."""
    return (
        summary_int(summary, "added-records")
        - summary_int(summary, "deleted-records")
        - summary_int(summary, "added-position-deletes")
        + summary_int(summary, "removed-position-deletes")
    )


def rows_held(summary: Mapping[str, str]) -> tuple[int | None, str]:
    """(rows the table holds at this snapshot, why not known): ``total-records`` less ``total-position-deletes``;
    unknown with equality deletes (which rows they hit is only known by reading the data)."""
    if summary.get("total-records") in (None, ""):
        return None, "its summary has no total-records (written by a writer that does not keep totals)"
    equality = summary_int(summary, "total-equality-deletes")
    if equality:
        return None, (
            f"it has {equality} equality deletes, whose effect on the row count only a data scan shows; compact the "
            "table (e.g. Spark `CALL system.rewrite_data_files` with delete-file-threshold 1) and reconcile again"
        )
    return summary_int(summary, "total-records") - summary_int(summary, "total-position-deletes"), ""


@dataclass(frozen=True)
class SnapshotFact:
    """What one snapshot did, as remembered: a snapshot never changes, so it is read once."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str
    engine: str  # the summary's engine-name, "" when none is named
    flink_job_id: str  # "" when not written by a Flink Iceberg sink
    checkpoint: int | None  # flink.max-committed-checkpoint-id
    added: int
    deleted: int
    net: int

    @property
    def by_flink(self) -> bool:
        return bool(self.flink_job_id)

    @property
    def is_rewrite(self) -> bool:
        return is_rewrite(self.operation, self.net)

    def describe(self) -> str:
        at = dt.datetime.fromtimestamp(self.timestamp_ms / 1000, dt.UTC).isoformat(timespec="milliseconds")
        return f"snapshot {self.snapshot_id} ({self.operation}, {self.engine or 'no engine named'}, at {at})"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SnapshotFact:
        return cls(**json.loads(text))


def is_rewrite(operation: str, net: int) -> bool:
    """A compaction: Iceberg's ``replace`` keeps the table's data, only the files change (a function, not only
    ``SnapshotFact``'s property, so that mutation testing reaches it)."""
    return operation == "replace" and net == 0


def classify(
    snapshot_id: int, parent_id: int | None, timestamp_ms: int, operation: str, summary: Mapping[str, str]
) -> SnapshotFact:
    """A snapshot's fact from its summary: a Flink Iceberg sink marks its commits with ``flink.job-id`` and
    ``flink.operator-id`` (and the checkpoint they hold); anything else (pyiceberg, Spark, a CLI) is another writer."""
    flink_job = summary.get("flink.job-id") or ""
    if not flink_job and summary.get("flink.operator-id"):
        flink_job = "unknown"
    checkpoint = summary.get("flink.max-committed-checkpoint-id")
    return SnapshotFact(
        snapshot_id=snapshot_id,
        parent_id=parent_id,
        timestamp_ms=timestamp_ms,
        operation=operation,
        engine=summary.get("engine-name") or "",
        flink_job_id=flink_job,
        checkpoint=int(checkpoint) if checkpoint not in (None, "") else None,
        added=summary_int(summary, "added-records"),
        deleted=summary_int(summary, "deleted-records"),
        net=net_rows(summary),
    )


def other_writer(output: str, fact: SnapshotFact) -> OtherWriter | None:
    """The change another writer made in one snapshot, or None: the job's own commits, and compactions (``replace``
    with no net change: the same rows in other files). An ``overwrite`` that adds as many rows as it removes IS
    named (rows 0): it changed which rows the table holds even if not how many."""
    if fact.by_flink or fact.is_rewrite:
        return None
    if fact.net == 0 and fact.added == 0 and fact.deleted == 0:
        return None  # a snapshot that changed no rows (properties, an empty commit)
    return OtherWriter(output, fact.describe(), fact.net, f"snapshot:{fact.snapshot_id}")


def ancestry(head: int | None, facts: Mapping[int, SnapshotFact]) -> tuple[list[SnapshotFact], int | None]:
    """(the chain of facts from ``head`` back to the table's first snapshot, newest first; the id where the chain
    breaks because a snapshot is not known, None when it reaches the first snapshot)."""
    chain: list[SnapshotFact] = []
    seen: set[int] = set()
    current = head
    while current is not None:
        fact = facts.get(current)
        if fact is None or current in seen:
            return chain, current
        seen.add(current)
        chain.append(fact)
        current = fact.parent_id
    return chain, None


@dataclass(frozen=True)
class HistoryReset:
    """The head seen before is no longer an ancestor of the current snapshot (a rollback, a branch replaced): the
    rows of the abandoned snapshots are gone from the table."""

    old_head: int
    new_head: int
    common: int | None  # the newest snapshot both histories share
    rows: int  # net rows of the abandoned snapshots, negated
    found_ms: int

    def describe(self) -> str:
        at = dt.datetime.fromtimestamp(self.found_ms / 1000, dt.UTC).isoformat(timespec="seconds")
        since = f"since snapshot {self.common}" if self.common is not None else "since the table's first snapshot"
        return (
            f"history reset: snapshot {self.old_head} is no longer an ancestor of current snapshot {self.new_head} "
            f"(a rollback or a replaced branch, found at {at}); its changes {since} are gone"
        )


def history_reset(
    old_head: int | None, new_chain: list[SnapshotFact], facts: Mapping[int, SnapshotFact], now_ms: int
) -> HistoryReset | None:
    """The reset between the head seen last and the current chain, or None when the old head is an ancestor."""
    if old_head is None or not new_chain:
        return None
    in_new = {f.snapshot_id for f in new_chain}
    if old_head in in_new:
        return None
    abandoned, _ = ancestry(old_head, facts)
    gone, common = 0, None
    for fact in abandoned:
        if fact.snapshot_id in in_new:
            common = fact.snapshot_id
            break
        gone += fact.net
    return HistoryReset(old_head, new_chain[0].snapshot_id, common, -gone, now_ms)
