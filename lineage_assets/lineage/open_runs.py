"""Which runs of a job Marquez holds open now: the sensors close every open run that is not the engine's current
one, so a job name never has two open runs, whoever opened them (another Dagster instance, a lost event)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineage_assets.lineage.identity import Job
from lineage_assets.lineage.marquez_client import MarquezClient, MarquezError

if TYPE_CHECKING:
    from lineage_assets.lineage.resource import LineageResource

#: Marquez's states of a run that has not ended
OPEN = frozenset({"NEW", "RUNNING"})
#: how many of a job's newest runs are looked at on each tick
LOOK_BACK = 100


def open_runs(marquez: MarquezClient, job: Job) -> list[dict]:
    """The job's runs that Marquez holds open, newest first (each as Marquez returns it, facets included)."""
    return [r for r in marquez.runs(job.namespace, job.name, limit=LOOK_BACK) if r.get("state") in OPEN]


def run_facet(run: dict, facet: str, field: str) -> str | None:
    value = ((run.get("facets") or {}).get(facet) or {}).get(field)
    return str(value) if value is not None else None


def run_closed(run_id: str, lineage: LineageResource) -> bool:
    """Whether the run ended: its end went into this outbox, or Marquez holds it closed (another instance closed it).
    Marquez out of reach counts as not closed."""
    if lineage.outbox().ended(run_id):
        return True
    try:
        run = lineage.marquez().run(run_id)
    except MarquezError:
        return False
    return run is not None and run.get("state") not in OPEN
