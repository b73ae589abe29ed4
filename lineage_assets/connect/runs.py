"""Connector state -> OpenLineage runs: the pure state machine the connector sensor drives.

One OpenLineage run per continuous stretch of a connector incarnation running: START (then RUNNING, with datasets
and the connector's tasks in the ``kafka_connector`` run facet) when it starts running; RUNNING again when the
registry has a new schema version; FAIL with the failed task's trace the moment a task fails (opening a run first if
none was open, so a connector that fails before its first record is still reported); ABORT when it is paused or
deleted, or when it was deleted and created again between two looks (a new incarnation: the old run ends, a new one
opens). A connector that runs again after that gets a new run. A worker restart keeps the run: the connector's
incarnation is the same.

Every event carries the connector's lineage as Connect runs it (its account, from its live configuration: see
connector_lineage.py); when that changes while the run is open (its config was changed through Connect's REST API),
the run COMPLETEs and the next run of its chain opens with the new one, so Marquez follows within one tick
(Marquez makes a streaming run's lineage of every dataset its events named: only a new run shows a topic no longer
read). When the account cannot be read, the last one
read stands (kept in the cursor); only a connector never read is reported as declared, and the events say so.

Run ids derive from what Connect's config topic records (the incarnation's creation, its last resume), so every
Dagster instance that watches the same Connect cluster names the same run (``run_id_of``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace

from openlineage.client.event_v2 import RunEvent, RunState

from lineage_assets.connect.client import ConnectorStatus
from lineage_assets.connect.incarnations import Incarnation
from lineage_assets.lineage.account import Account, Unknown, declared_account
from lineage_assets.lineage.events import ConnectorTask, Engine, EventBuilder, KafkaConnectorRunFacet, run_id_for
from lineage_assets.lineage.identity import Job, Pipeline

ENGINE = Engine("kafka-connect", "4.1.2")


@dataclass(frozen=True)
class Track:
    """What the sensor remembers of one connector between ticks (stored in the sensor cursor)."""

    run_id: str | None = None
    last_state: str | None = None
    schema: str | None = None
    #: the incarnation the open (or last) run belongs to
    incarnation: str | None = None
    #: the connector's last account read from Connect (``Account.to_dict``): what its events carry while it cannot be
    #: read, and what a new account is compared with
    account: dict | None = None

    @classmethod
    def load(cls, data: dict | None) -> Track:
        """From a cursor entry; keys that another version of this class wrote are left out (a cursor outlives an
        upgrade of the code)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def dump(self) -> dict:
        return asdict(self)


def _state(status: ConnectorStatus | None) -> str:
    if status is None:
        return "DELETED"
    if status.state == "FAILED" or status.failed_tasks:
        return "FAILED"
    return status.state  # RUNNING, PAUSED, UNASSIGNED, RESTARTING, STOPPED


def connector_facets(job: str, status: ConnectorStatus | None, incarnation: Incarnation | None) -> dict:
    tasks = [ConnectorTask(id=t.id, state=t.state, workerId=t.worker) for t in (status.tasks if status else ())]
    ref = incarnation.ref if incarnation else "unknown"
    return {"kafka_connector": KafkaConnectorRunFacet(name=job, incarnation=ref, tasks=tasks)}


def reported_account(pipeline: Pipeline, job: str, account: Account | Unknown | None, stored: dict | None) -> Account:
    """The account a connector's events carry: ``account`` when it was read; else the last one read (``stored``,
    from the cursor); only for a connector never read, the declaration, its reader saying so and why."""
    if isinstance(account, Account):
        return account
    if stored:
        return Account.from_dict(stored)
    why = account.reason if isinstance(account, Unknown) else "it was not read"
    return replace(
        declared_account(pipeline, job),
        reader=f"the identity module's declaration, because the engine's account is unknown: {why}",
    )


def step(
    job: str,
    track: Track,
    status: ConnectorStatus | None,
    schema: str | None,
    builder: EventBuilder,
    now: dt.datetime,
    incarnation: Incarnation | None = None,
    new_run_id: Callable[[], str] | None = None,
    account: Account | Unknown | None = None,
) -> tuple[Track, list[RunEvent]]:
    """Next track and the events to emit for one observation of a connector (``incarnation``: what Connect's
    config topic says of it, None when unknown; ``new_run_id``: the id of a run opened now, see ``run_id_of``;
    ``account``: its lineage as read from Connect now, Unknown or None when not read, see ``reported_account``)."""
    state = _state(status)
    events: list[RunEvent] = []
    run_id = track.run_id
    ref = incarnation.ref if incarnation else None
    facets = connector_facets(job, status, incarnation)
    carried = reported_account(builder.pipeline, job, account, track.account)
    known = account.to_dict() if isinstance(account, Account) else None

    def emit(kind: RunState, **kwargs) -> None:
        assert run_id is not None
        events.append(
            builder.event(
                job, kind, run_id, event_time=now, engine=ENGINE, run_facets=facets, account=carried, **kwargs
            )
        )

    def open_run() -> None:
        nonlocal run_id
        run_id = new_run_id() if new_run_id else run_id_for(job, now, f"{job}@{now.isoformat()}")
        emit(RunState.START)

    if run_id is not None and ref is not None and track.incarnation not in (None, ref):
        # deleted and created again since the last look: the old incarnation's run ends
        emit(RunState.ABORT)
        run_id = None
    if state == "RUNNING":
        if run_id is None:
            open_run()
            emit(RunState.RUNNING)
        elif schema != track.schema:
            emit(RunState.RUNNING)
    elif state == "FAILED" and (track.last_state != "FAILED" or run_id is not None):  # a new failure
        if run_id is None:
            open_run()
        failed = status.failed_tasks if status else ()
        trace = failed[0].trace if failed and failed[0].trace else "connector FAILED (no task trace)"
        message = f"{job}: task {failed[0].id if failed else '?'} failed: {trace.splitlines()[0]}"
        emit(RunState.FAIL, error=(message, trace))
        run_id = None
    elif state in ("PAUSED", "STOPPED", "DELETED") and run_id is not None:
        emit(RunState.ABORT)
        run_id = None
    # UNASSIGNED / RESTARTING: transient, no event
    if known is not None and known != track.account and run_id is not None and not events:
        if track.account is None:  # first read by this sensor: the open run now says what it reads and writes
            emit(RunState.RUNNING)
        else:
            # its configuration changed: that stretch of running ends and another begins. Marquez makes a streaming
            # run's lineage of every dataset its events ever named, so only a new run can show one it reads no more
            events.append(
                builder.event(
                    job,
                    RunState.COMPLETE,
                    run_id,
                    event_time=now,
                    engine=ENGINE,
                    run_facets=facets,
                    account=Account.from_dict(track.account),  # the stretch ends with what it read and wrote
                )
            )
            run_id = _next_run_id(builder.pipeline.job(job), run_id, incarnation, now)
            emit(RunState.START)
            emit(RunState.RUNNING)
    stored = known if known is not None else track.account
    return Track(run_id, state, schema, ref or track.incarnation, stored), events


def _next_run_id(job: Job, run_id: str, incarnation: Incarnation | None, now: dt.datetime) -> str:
    """The run after ``run_id`` in its incarnation's chain (``run_id_of``), the same on every instance."""
    if incarnation is None:
        return run_id_for(job.name, now, f"{run_id}#next")
    created = dt.datetime.fromtimestamp(incarnation.created_ms / 1000, dt.UTC)
    return run_id_for(f"{job.namespace}/{job.name}", created, f"{run_id}#next")


def run_id_of(job: Job, incarnation: Incarnation, closed: Callable[[str], bool], limit: int = 50) -> str:
    """The run of a connector's current stretch of running, from Connect's own records only, so that every
    instance watching the cluster names the same run: its incarnation and its last resume (a target-state record).
    A stretch that already had a run that ended (a task failed, then was restarted: Connect records no config for
    that) takes the next id of a chain derived from the previous one, so the chain is the same everywhere."""
    created = dt.datetime.fromtimestamp(incarnation.created_ms / 1000, dt.UTC)
    key = f"{job.namespace}/{job.name}"
    run_id = run_id_for(key, created, f"{job.name}@{incarnation.ref}#{incarnation.resumed_ref or 'created'}")
    for _ in range(limit):
        if not closed(run_id):
            return run_id
        run_id = run_id_for(key, created, f"{run_id}#next")
    return run_id
