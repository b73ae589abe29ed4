"""Other writers' changes a person accepted as intended, per hop: who accepted what, when, and up to which position.

Kept as CountStore facts (kind ``accepted``, key ``<job>|<ref>``), so every process that reconciles the hop (the
CLI, the Dagster checks) leaves the same changes out. An acceptance covers a writer up to the position it had when
it was accepted (``OtherWriter.position``): the writer's later records are named again, never silently accepted.
Revoking deletes the fact: the change is counted and named again at the next reading.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lineage_assets.conservation.balance import OtherWriter
from lineage_assets.conservation.count_store import CountStore

KIND = "accepted"


class AcceptanceError(ValueError):
    """A ref that cannot be accepted or revoked; the message says what was wrong and what to do."""


@dataclass(frozen=True)
class Acceptance:
    job: str
    ref: str
    #: the position the acceptance covers (None: accepted before positions were kept, it covers the ref whole)
    position: str | None
    by: str
    at: float

    def as_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "position": self.position, "by": self.by, "at": self.when}

    @property
    def when(self) -> str:
        return dt.datetime.fromtimestamp(self.at, dt.UTC).isoformat(timespec="seconds")

    def text(self) -> str:
        through = f" up to {self.position}" if self.position else ""
        return f"{self.job}: {self.ref}{through}, accepted by {self.by} at {self.when}"


def load(counts: CountStore, job: str) -> dict[str, Acceptance]:
    """ref -> the acceptance of ``job``'s other writer."""
    found = {}
    for key, value in counts.facts(KIND).items():
        name, _, ref = key.partition("|")
        if name == job:
            stamp = json.loads(value)
            found[ref] = Acceptance(job, ref, stamp.get("position"), stamp.get("by", "?"), stamp.get("at", 0.0))
    return found


def covered(counts: CountStore, job: str) -> dict[str, str | None]:
    """ref -> the position its acceptance covers, as ``HopBalance.with_accepted`` takes it."""
    return {ref: a.position for ref, a in load(counts, job).items()}


def record(counts: CountStore, job: str, writers: Iterable[OtherWriter], by: str, at: float) -> list[Acceptance]:
    """Accept ``writers`` (as a reading just named them) up to their positions now."""
    made = [Acceptance(job, w.reference, w.position, by, at) for w in writers]
    stamps = {f"{job}|{a.ref}": json.dumps({"by": by, "at": at, "position": a.position}) for a in made}
    counts.put_facts(KIND, stamps)
    return made


def chosen(named: dict[str, OtherWriter], refs: list[str], job: str) -> list[OtherWriter]:
    """The writers ``refs`` name among those a reading named now; an unknown ref raises, listing the named ones."""
    unknown = sorted(set(refs) - set(named))
    if unknown:
        raise AcceptanceError(
            f"{unknown} is not another writer of {job}'s output now; it names: {sorted(named) or 'none'}. "
            "Copy the reference from the brackets of `lineage-lab reconcile --job " + job + "`"
        )
    return [named[r] for r in dict.fromkeys(refs)]


def revoke(counts: CountStore, job: str, refs: list[str]) -> list[Acceptance]:
    """Undo acceptances: the changes count and are named again. A ref never accepted raises, listing those that
    were (nothing is revoked then)."""
    held = load(counts, job)
    unknown = sorted(set(refs) - set(held))
    if unknown:
        raise AcceptanceError(
            f"{unknown} was never accepted on {job}; its acceptances: {sorted(held) or 'none'}. "
            f"List them with `lineage-lab reconcile --job {job} --acceptances`"
        )
    counts.drop_facts(KIND, [f"{job}|{r}" for r in refs])
    return [held[r] for r in dict.fromkeys(refs)]
