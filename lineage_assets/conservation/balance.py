"""One hop's balance: what came in, what went out, what was dead-lettered or is still pending, and the rest.

Pure arithmetic, so that every reader of a store (Kafka, Iceberg, the archive, Flink) only has to produce counts.
``missing`` and ``duplicates`` are what the counts cannot explain: ``in - out - dead_letters - pending`` below or
above zero. Counts of one cut can hide a loss behind a duplicate of the same size; the per-key audit (``--deep``)
is there for that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lineage_assets.conservation.values import CHECKSUM, PLACES, ValueBalance, text_of

Status = Literal["balanced", "pending", "missing", "duplicates", "values_differ", "unknown"]


@dataclass(frozen=True)
class OtherWriter:
    """A change to a hop's output made by something other than its job: ``rows`` added (>0) or removed (<0).

    Its rows are in the hop's figure named by ``figure`` (``out``, or ``dead_letters`` for a dead-letter topic):
    every reader counts what the stores hold, whoever wrote it, so an unaccepted change shows as a difference.
    """

    output: str  # dataset as namespace/name
    what: str  # the snapshot, object or producer that did it, as a person can look it up
    rows: int
    #: a stable reference to the change, what ``reconcile --accept`` takes: it names the writer and where its
    #: change starts (``snapshot:<id>``, ``object:<key>``, ``records:<topic>:<partition>@<first offset>``), so it
    #: does not change as more of the writer's records arrive; the description when not given
    ref: str = ""
    #: how far the change reaches now (a Kafka writer's ``<partition>@<last offset>,...``); empty when the ref is
    #: its own position (a snapshot, an object). An acceptance covers the change up to this position only.
    position: str = ""
    figure: Literal["out", "dead_letters"] = "out"
    #: the values its records claim in the hop's summed columns, in units: (output column, units) pairs
    claimed: tuple[tuple[str, int], ...] = ()

    @property
    def reference(self) -> str:
        return self.ref or self.what

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "what": self.what,
            "rows": self.rows,
            "ref": self.reference,
            "position": self.position or None,
            "figure": self.figure,
            **(
                {"values": {c: text_of(u, 0 if c == CHECKSUM else PLACES) for c, u in self.claimed}}
                if self.claimed
                else {}
            ),
        }


def claimed_text(column: str, units: int) -> str | None:
    return text_of(units, 0 if column == CHECKSUM else PLACES)


def unexplained(in_: int | None, out: int | None, dead_letters: int | None, pending: int | None) -> int | None:
    """What the counts cannot explain: in - (out + dead letters + pending); None when a figure is unknown."""
    if in_ is None or out is None or dead_letters is None or pending is None:
        return None
    return in_ - out - dead_letters - pending


def status_of(difference: int | None, pending: int | None) -> Status:
    """One word for a hop: unknown, missing (lost), duplicates (doubled), pending (in flight) or balanced."""
    if difference is None:
        return "unknown"
    if difference > 0:
        return "missing"
    if difference < 0:
        return "duplicates"
    return "pending" if pending else "balanced"


# HopBalance's properties call these: mutmut does not mutate a decorated function (a property), so their arithmetic
# lives here, where it is mutated and tested.
def figures_known(unknown: str, *figures: int | None) -> bool:
    """Whether a balance can be judged: no reason it is unknown and every figure read."""
    return not unknown and None not in figures


def difference_of(
    unknown: str, in_: int | None, out: int | None, dead_letters: int | None, pending: int | None
) -> int | None:
    """``unexplained`` of a balance's figures; None when the balance is unknown (``unknown`` says why)."""
    return unexplained(in_, out, dead_letters, pending) if not unknown else None


def missing_of(difference: int | None) -> int | None:
    """Records lost: a positive difference, else 0; None when unknown."""
    return None if difference is None else max(difference, 0)


def duplicates_of(difference: int | None) -> int | None:
    """Records doubled: a negative difference, as a positive count, else 0; None when unknown."""
    return None if difference is None else max(-difference, 0)


def is_lost_or_doubled(status: Status) -> bool:
    """The statuses that report a loss or duplicates (worth a second look, then a report)."""
    return status in ("missing", "duplicates")


def is_wrong(status: Status) -> bool:
    """The statuses that fail a hop: records lost or doubled, or values that do not add up (each worth a second
    look at a streaming hop, then a report)."""
    return is_lost_or_doubled(status) or status == "values_differ"


def with_values(status: Status, values_differ: bool) -> Status:
    """The hop's status once its values are weighed: counts that balance (or are pending) with a summed column that
    does not add up is ``values_differ``; a count that is wrong or unknown says more and stays."""
    return "values_differ" if values_differ and status in ("balanced", "pending") else status


@dataclass(frozen=True)
class HopBalance:
    """The reconciliation of one hop over ``range`` (the offsets, snapshot or windows the figures cover).

    The contract every reader follows: ``out`` (and ``dead_letters``) count what the outputs hold, other writers'
    changes included (a deleted row is missing whoever deleted it, a foreign record is a duplicate whoever
    produced it); ``other_writers`` names those changes, so an unaccepted change always shows as a difference the
    named writers explain. Accepting one (``with_accepted``) takes its rows out of the figure they are in, once.
    ``unknown`` says why a figure could not be read (endpoint and what to do): then nothing is concluded, never a
    false balance.
    """

    job: str
    input: str
    outputs: tuple[str, ...]
    in_: int | None = None
    out: int | None = None
    dead_letters: int | None = None
    pending: int | None = None
    range: dict[str, Any] = field(default_factory=dict)
    other_writers: tuple[OtherWriter, ...] = ()
    #: epoch seconds of the oldest record still pending (None when nothing is pending or it is not known)
    pending_since: float | None = None
    unknown: str = ""
    #: what the figures mean for this hop, one line each (shown with the check)
    notes: tuple[str, ...] = ()
    #: other writers' changes a person accepted as intended (a deletion by request, a fixture): their rows are
    #: left out of ``out`` before the balance is judged, and they are listed apart
    accepted: tuple[OtherWriter, ...] = ()
    #: seconds the reading of this hop took (its stores, waits for a stable cut included)
    took_s: float | None = None
    #: the summed columns' balances (values.py): empty where the column lineage sums no column
    values: tuple[ValueBalance, ...] = ()

    @property
    def known(self) -> bool:
        return figures_known(self.unknown, self.in_, self.out, self.dead_letters, self.pending)

    @property
    def difference(self) -> int | None:
        """in - (out + dead letters + pending): >0 lost, <0 doubled; None when a figure is unknown."""
        return difference_of(self.unknown, self.in_, self.out, self.dead_letters, self.pending)

    @property
    def missing(self) -> int | None:
        return missing_of(self.difference)

    @property
    def duplicates(self) -> int | None:
        return duplicates_of(self.difference)

    @property
    def status(self) -> Status:
        return with_values(status_of(self.difference, self.pending), any(v.differs for v in self.values))

    @property
    def lost_or_doubled(self) -> bool:
        return is_lost_or_doubled(self.status)

    @property
    def wrong(self) -> bool:
        """Records lost or doubled, or values that do not add up: the hop fails."""
        return is_wrong(self.status)

    def pending_age(self, now: float) -> float | None:
        if not self.pending or self.pending_since is None:
            return None
        return max(now - self.pending_since, 0.0)

    def unknown_because(self, why: str) -> HopBalance:
        return replace(self, unknown=why)

    def summary(self) -> str:
        """One line a person reads first."""
        head = f"{self.job}: {self.input} -> {', '.join(self.outputs)}"
        if self.status == "unknown":
            return f"{head}: unknown: {self.unknown or 'a figure could not be read'}"
        figures = (
            f"in {self.in_}, out {self.out}, dead letters {self.dead_letters}, pending {self.pending}, "
            f"missing {self.missing}, duplicates {self.duplicates}"
        )
        named = "; ".join(f"{w.what}: {w.rows:+d} rows in {w.output} [{w.reference}]" for w in self.other_writers)
        accepted = "; ".join(f"{w.reference}: {w.rows:+d}" for w in self.accepted)
        values = "; ".join(v.summary() for v in self.values)
        return (
            f"{head}: {self.status}: {figures}"
            + (f"; values: {values}" if values else "")
            + (f"; other writers: {named}" if named else "")
            + (f"; accepted changes: {accepted}" if accepted else "")
        )

    def with_accepted(self, refs: Mapping[str, str | None] | set[str]) -> HopBalance:
        """This balance with the other writers accepted: ``refs`` maps a reference to the position its acceptance
        covers (None: any). A writer whose change reaches past that position is not taken (its later part was
        never reviewed); a taken writer's rows leave the figure they are in."""
        covered = refs if isinstance(refs, Mapping) else dict.fromkeys(refs)

        def taken(w: OtherWriter) -> bool:
            return w.reference in covered and covered[w.reference] in (None, w.position)

        chosen = tuple(w for w in self.other_writers if taken(w))
        if not chosen or self.out is None or self.dead_letters is None:
            return self

        def claimed(column: str, figure: str) -> int:
            return sum(u for w in chosen if w.figure == figure for c, u in w.claimed if c == column)

        return replace(
            self,
            out=self.out - sum(w.rows for w in chosen if w.figure == "out"),
            dead_letters=self.dead_letters - sum(w.rows for w in chosen if w.figure == "dead_letters"),
            other_writers=tuple(w for w in self.other_writers if not taken(w)),
            accepted=self.accepted + chosen,
            values=tuple(v.less(claimed(v.column, "out"), claimed(v.column, "dead_letters")) for v in self.values),
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``lineage-lab reconcile --json``, one object per hop."""
        return {
            "job": self.job,
            "input": self.input,
            "outputs": list(self.outputs),
            "in": self.in_,
            "out": self.out,
            "dead_letters": self.dead_letters,
            "pending": self.pending,
            "missing": self.missing,
            "duplicates": self.duplicates,
            "range": self.range,
            "status": self.status,
            "other_writers": [w.as_dict() for w in self.other_writers],
            "accepted": [w.as_dict() for w in self.accepted],
            "pending_since": self.pending_since,
            "unknown": self.unknown or None,
            "notes": list(self.notes),
            "took_s": self.took_s,
            "values": {v.column: v.as_dict() for v in self.values},
        }


class StoreUnavailable(RuntimeError):
    """A store a hop is counted from did not answer; the message names the endpoint and what to do."""
