"""Reconcile every hop of the pipeline: each hop's reader (rules.py, by the job's kind) produces its counts, and
a hop that looks lost or doubled while its job runs is read again at the next cut before it is reported (a job
commits its outputs and its input offsets in two steps, so one look can fall between them)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from lineage_assets.conservation import acceptances, key_audit
from lineage_assets.conservation.acceptances import Acceptance
from lineage_assets.conservation.balance import HopBalance, StoreUnavailable
from lineage_assets.conservation.count_store import Busy
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.rules import reader_of, reconciled_hops
from lineage_assets.conservation.stores import Stores

log = logging.getLogger(__name__)

#: seconds to wait before reading a streaming hop again when one look shows a loss or duplicates (two checkpoints
#: of the Flink jobs, one flush of the sink)
CONFIRM_AFTER_S = 25.0


def accept(stores: Stores, job: str, refs: list[str], by: str) -> list[Acceptance]:
    """Record other writers' changes to ``job``'s output as intended (``refs``: their references), each up to the
    position a reading made now under the hop's lock names (nothing can be counted in between); a ref that reading
    does not name raises ``AcceptanceError``."""
    hop = reconciled_hops(stores.pipeline)[job]
    with stores.counts.locked(job):
        now = reader_of(hop)(hop, stores).with_accepted(acceptances.covered(stores.counts, job))
        named = {w.reference: w for w in now.other_writers}
        return acceptances.record(stores.counts, job, acceptances.chosen(named, refs, job), by, time.time())


def revoke(stores: Stores, job: str, refs: list[str]) -> list[Acceptance]:
    """Undo acceptances of ``job``'s other writers: their changes count and are named again."""
    with stores.counts.locked(job):
        return acceptances.revoke(stores.counts, job, refs)


def accepted_of(stores: Stores, job: str) -> list[Acceptance]:
    """``job``'s acceptances, oldest first."""
    return sorted(acceptances.load(stores.counts, job).values(), key=lambda a: a.at)


#: how an unknown balance begins when another process was reconciling the same hop (``lock_timeout`` passed)
BUSY = "another reconciliation of this hop was running"


def balance_of(hop: Hop, stores: Stores, lock_timeout: float | None = None) -> HopBalance:
    """The hop's balance, with accepted changes left out, or an unknown one saying which store did not answer and
    what to do; with the seconds its reading took."""
    started = time.monotonic()
    try:
        with stores.counts.locked(hop.job.name, lock_timeout):
            found = reader_of(hop)(hop, stores)
        found = found.with_accepted(acceptances.covered(stores.counts, hop.job.name))
        if stores.deep:
            found = replace(found, notes=(*found.notes, *deep_notes(hop, stores)))
    except Busy:
        found = HopBalance(
            hop.job.name, hop.input.qualified_name, hop.output_names, unknown=f"{BUSY}; it reports when it ends"
        )
    except StoreUnavailable as exc:
        found = HopBalance(hop.job.name, hop.input.qualified_name, hop.output_names, unknown=str(exc))
    except Exception as exc:  # a reader's failure is an unknown balance of that hop, never another hop's report
        log.exception("reconciling %s failed", hop.job.name)
        why = f"reading the hop failed: {type(exc).__name__}: {exc}; see the log, fix the store or the reader"
        found = HopBalance(hop.job.name, hop.input.qualified_name, hop.output_names, unknown=why)
    return replace(found, took_s=round(time.monotonic() - started, 2))


def deep_notes(hop: Hop, stores: Stores) -> list[str]:
    """The per-key audit of a hop whose outputs keep keys (``--deep``). An audit that cannot read a store adds a
    note and keeps the counts: the balance above it stands on its own reads."""
    try:
        return key_audit.audit(hop, stores)
    except StoreUnavailable as exc:
        return [f"per-key audit not done: {exc}"]


def reconcile(
    stores: Stores,
    jobs: list[str] | None = None,
    confirm_after_s: float = CONFIRM_AFTER_S,
    sleep: Callable[[float], None] = time.sleep,
    lock_timeout: float | None = None,
) -> list[HopBalance]:
    """Every hop's balance (or those of ``jobs``), in the order of the data flow."""
    chosen = [h for name, h in reconciled_hops(stores.pipeline).items() if not jobs or name in jobs]
    found = [balance_of(h, stores, lock_timeout) for h in chosen]
    doubtful = [i for i, b in enumerate(found) if b.wrong and chosen[i].job.processing_type == "STREAMING"]
    if doubtful and confirm_after_s > 0:
        sleep(confirm_after_s)
        for i in doubtful:
            found[i] = balance_of(chosen[i], stores, lock_timeout)
    return found
