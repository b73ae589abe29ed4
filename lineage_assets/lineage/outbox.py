"""Lineage delivery that never blocks the pipeline and never loses an event.

``emit`` writes the event to a durable SQLite outbox and returns; a drainer thread sends queued events to the
lineage backend's ``/api/v1/lineage`` endpoint:

- in order within each job (a job's next event waits until the previous one is delivered or dead-lettered), and
  several jobs at once (Marquez spends tens of milliseconds of its own and its database's work per event: one
  client at a time gets 15-20 events/s into it, four in parallel about 1.7 times that on a 2-core machine). In order
  per job, not per run: Marquez 0.51 makes a run's end the job's current version, so the end of a replaced run
  delivered after the opening of the run that replaced it would put the old lineage back;
- with exponential backoff while the backend is unreachable or answers 5xx/408/429;
- once per (runId, eventType, eventTime): duplicates are dropped when enqueued;
- never a START/RUNNING/OTHER after the run's terminal event (the backend would re-open the run): such late
  events are kept as ``superseded`` and not sent;
- a 4xx answer dead-letters the event with the backend's reason, except 401/403: refused credentials keep
  every event queued (with the reason) until the API key is fixed.

Several processes (Dagster's daemon, run workers, Flink job clients) share one outbox file; a drainer leases the
event it sends, so two drainers never send the same event concurrently.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests
from openlineage.client.event_v2 import RunEvent

from lineage_assets.lineage.events import to_json

# Mutation testing (scripts/mutation.py) leaves the SQL text of the per-run rules unmutated ("no mutate" pragmas):
# SQL keywords and names are case-insensitive, so mutmut's case mutants of it are equivalent, and its XX mutants
# only break the syntax. tests/unit/lineage_assets/lineage/test_outbox.py pins what the statements do.
NON_TERMINAL = ("START", "RUNNING", "OTHER")
LEASE_SECONDS = 30.0
MAX_BACKOFF = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    event_time TEXT NOT NULL,
    job TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued',   -- queued | sent | dead | superseded
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt REAL NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until REAL,
    last_error TEXT,
    created REAL NOT NULL,
    done_at REAL,
    UNIQUE (run_id, event_type, event_time)
);
CREATE INDEX IF NOT EXISTS events_by_state ON events (state, run_id, seq);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class OutboxError(ValueError):
    """An event cannot be queued (it is not an OpenLineage run event); the message says what is missing."""


@dataclass(frozen=True)
class Counts:
    queued: int
    sent: int
    rejected: int
    superseded: int
    duplicates_dropped: int
    #: seconds the oldest queued event has waited (0 when nothing is queued): how far Marquez is behind
    backlog_age: float = 0.0


@dataclass(frozen=True)
class DeadLetter:
    seq: int
    run_id: str
    event_type: str
    job: str
    reason: str


class Outbox:
    """The durable queue. Safe to use from several threads and processes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._db() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: an acknowledged emit survives a process crash
            self._local.conn = conn
        yield conn

    # producers --------------------------------------------------------------------------------------------
    def enqueue(self, event: RunEvent | dict | str) -> bool:
        """Queue one event durably. False when it duplicates one already queued (it is then dropped)."""
        payload = (
            to_json(event) if isinstance(event, RunEvent) else event if isinstance(event, str) else json.dumps(event)
        )
        try:
            doc = json.loads(payload)
            run_id, event_type, event_time = doc["run"]["runId"], doc["eventType"], doc["eventTime"]
            job = f"{doc['job']['namespace']}/{doc['job']['name']}"
        except (ValueError, KeyError, TypeError) as exc:
            raise OutboxError(
                f"not an OpenLineage run event (needs run.runId, eventType, eventTime, job.namespace/name): {exc!r}"
            ) from exc
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")  # pragma: no mutate
            try:
                ended = db.execute(
                    "SELECT 1 FROM events WHERE run_id = ? "  # pragma: no mutate
                    "AND event_type IN ('COMPLETE','ABORT','FAIL') "  # pragma: no mutate
                    "AND state != 'dead' LIMIT 1",  # pragma: no mutate
                    (run_id,),
                ).fetchone()
                state = "superseded" if ended and event_type in NON_TERMINAL else "queued"
                cur = db.execute(
                    "INSERT OR IGNORE INTO events "  # pragma: no mutate
                    "(run_id, event_type, event_time, job, payload, state, created) "  # pragma: no mutate
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",  # pragma: no mutate
                    (run_id, event_type, event_time, job, payload, state, time.time()),
                )
                if cur.rowcount == 0:
                    self._bump(db, "duplicates_dropped")
                db.execute("COMMIT")  # pragma: no mutate
            except BaseException:
                db.execute("ROLLBACK")  # pragma: no mutate
                raise
        return cur.rowcount == 1

    @staticmethod
    def _bump(db: sqlite3.Connection, name: str) -> None:
        db.execute(
            "INSERT INTO counters (name, value) VALUES (?, 1) ON CONFLICT(name) DO UPDATE SET value = value + 1",
            (name,),
        )

    # drainers ---------------------------------------------------------------------------------------------
    def lease_next(self, owner: str, now: float | None = None, limit: int = 100) -> list[tuple[int, str, str]]:
        """Lease the next deliverable event of up to ``limit`` runs: (seq, event_type, payload), oldest first.

        The limit keeps each write transaction short, so producers' inserts never wait long for the lock.
        """
        now = time.time() if now is None else now
        with self._db() as db:
            # find candidates without holding the write lock (a read sees a consistent WAL snapshot) ...
            heads = db.execute(
                "SELECT e.seq, e.event_type, e.payload FROM events e "  # pragma: no mutate
                "JOIN (SELECT job, MIN(seq) AS seq "  # pragma: no mutate
                "FROM events WHERE state = 'queued' GROUP BY job) h ON e.seq = h.seq "  # pragma: no mutate
                "WHERE e.next_attempt <= ? AND (e.lease_until IS NULL OR e.lease_until <= ?) "  # pragma: no mutate
                "ORDER BY e.seq LIMIT ?",  # pragma: no mutate
                (now, now, limit),
            ).fetchall()
            if not heads:
                return []
            # ... then take the leases in one short statement that re-checks each row is still free
            marks = ",".join("?" * len(heads))
            won = {
                seq
                for (seq,) in db.execute(
                    f"UPDATE events SET lease_owner = ?, lease_until = ? WHERE seq IN ({marks}) AND state = 'queued' "
                    "AND (lease_until IS NULL OR lease_until <= ?) RETURNING seq",  # pragma: no mutate
                    (owner, now + LEASE_SECONDS, *(h[0] for h in heads), now),
                ).fetchall()
            }
        return [h for h in heads if h[0] in won]

    def record(self, outcomes: list[tuple[int, str, str | None]]) -> None:
        """Apply a drain round's outcomes in one short transaction: (seq, sent|dead|retry|release, reason)."""
        now = time.time()
        sent = [seq for seq, what, _ in outcomes if what == "sent"]
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                if sent:
                    db.execute(
                        f"UPDATE events SET state = 'sent', done_at = ?, lease_owner = NULL, lease_until = NULL "
                        f"WHERE seq IN ({','.join('?' * len(sent))})",
                        (now, *sent),
                    )
                for seq, what, reason in outcomes:
                    if what == "dead":
                        db.execute(
                            "UPDATE events SET state = 'dead', last_error = ?, done_at = ?, lease_owner = NULL, "
                            "lease_until = NULL WHERE seq = ?",
                            (reason, now, seq),
                        )
                    elif what == "retry":
                        db.execute(
                            "UPDATE events SET attempts = attempts + 1, next_attempt = ? + "
                            "min(?, 0.25 * (1 << attempts)) * ?, last_error = ?, lease_owner = NULL, "
                            "lease_until = NULL WHERE seq = ?",
                            (now, MAX_BACKOFF, random.uniform(0.8, 1.2), reason, seq),
                        )
                    elif what == "release":  # give the lease back, no attempt counted
                        db.execute(
                            "UPDATE events SET lease_owner = NULL, lease_until = NULL, "
                            "last_error = COALESCE(?, last_error) WHERE seq = ?",
                            (reason, seq),
                        )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # inspection -------------------------------------------------------------------------------------------
    def counts(self) -> Counts:
        with self._db() as db:
            by_state = dict(db.execute("SELECT state, COUNT(*) FROM events GROUP BY state").fetchall())
            dups = db.execute("SELECT value FROM counters WHERE name = 'duplicates_dropped'").fetchone()
            (oldest,) = db.execute("SELECT MIN(created) FROM events WHERE state = 'queued'").fetchone()
        return Counts(
            queued=by_state.get("queued", 0),
            sent=by_state.get("sent", 0),
            rejected=by_state.get("dead", 0),
            superseded=by_state.get("superseded", 0),
            duplicates_dropped=dups[0] if dups else 0,
            backlog_age=max(0.0, time.time() - oldest) if oldest is not None else 0.0,
        )

    def ended(self, run_id: str) -> bool:
        """Whether a terminal event (COMPLETE, ABORT, FAIL) of the run went into this outbox (queued or sent): a run
        is closed once, whoever noticed its end first."""
        with self._db() as db:
            row = db.execute(
                "SELECT 1 FROM events WHERE run_id = ? "  # pragma: no mutate
                "AND event_type IN ('COMPLETE','ABORT','FAIL') "  # pragma: no mutate
                "AND state != 'dead' LIMIT 1",  # pragma: no mutate
                (run_id,),
            ).fetchone()
        return row is not None

    def events(self, states: tuple[str, ...] | None = None) -> list[dict]:
        """Every event ever queued (or only those in ``states``: queued, sent, dead, superseded), in queue order."""
        where, args = "", ()
        if states:
            where, args = f"WHERE state IN ({','.join('?' * len(states))})", tuple(states)
        with self._db() as db:
            return [json.loads(p) for (p,) in db.execute(f"SELECT payload FROM events {where} ORDER BY seq", args)]

    def dead_letters(self) -> list[DeadLetter]:
        with self._db() as db:
            rows = db.execute(
                "SELECT seq, run_id, event_type, job, last_error FROM events WHERE state = 'dead' ORDER BY seq"
            ).fetchall()
        return [DeadLetter(*row) for row in rows]

    def pending_errors(self) -> list[tuple[str, int, str]]:
        """(job, attempts, last error) of queued events that failed at least once (also while the backend was
        unreachable or refused the credentials: those are not counted as attempts)."""
        with self._db() as db:
            return db.execute(
                "SELECT job, attempts, last_error FROM events WHERE state = 'queued' "
                "AND (attempts > 0 OR last_error IS NOT NULL) ORDER BY seq"
            ).fetchall()


class Drainer:
    """Sends an outbox's events to ``{url}/api/v1/lineage`` from a background thread."""

    def __init__(
        self, outbox: Outbox, url: str, timeout: float = 5.0, workers: int = 4, api_key: str | None = None
    ) -> None:
        self.outbox = outbox
        self.endpoint = url.rstrip("/") + "/api/v1/lineage"
        # the way OpenLineage's HTTP transport authenticates (ApiKeyTokenProvider): a bearer token
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout
        self.workers = max(1, workers)
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._sessions = threading.local()  # one HTTP session (keep-alive connection) per sending thread
        self._pool: ThreadPoolExecutor | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # circuit breaker: while the backend is unreachable, wait instead of trying every run's next event
        self._unreachable_until = 0.0
        self._unreachable_backoff = 0.0

    def start(self) -> Drainer:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="lineage-drainer", daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=self.timeout + 5)
        if self._pool:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                delivered = self.drain_once()
            except sqlite3.Error:
                delivered = 0
            if not delivered:
                self._wake.wait(0.5)
                self._wake.clear()

    def drain_once(self) -> int:
        """Send the next event of every run once; returns how many were delivered or dead-lettered.

        Outcomes are recorded in one transaction per round, so the drainer takes the outbox's write lock rarely
        and producers' inserts do not queue behind it.
        """
        if time.monotonic() < self._unreachable_until:
            return 0
        # after the backend was unreachable, probe with one event before leasing a batch
        # (a batch small enough that a backend answering slowly cannot hold its leases past LEASE_SECONDS)
        leased = self.outbox.lease_next(self.owner, limit=1 if self._unreachable_backoff else 4 * self.workers)
        if not leased:
            return 0
        # the leased events belong to different runs (one head per run): they may travel in parallel
        if len(leased) == 1 or self.workers == 1:
            results = [self._send(payload) for _, _, payload in leased]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="lineage-send")
            results = list(self._pool.map(lambda item: self._send(item[2]), leased))
        outcomes: list[tuple[int, str, str | None]] = []
        unreachable = False
        for (seq, _event_type, _payload), outcome in zip(leased, results, strict=True):
            if outcome is None:
                outcomes.append((seq, "sent", None))
            elif outcome.startswith("reject:"):
                outcomes.append((seq, "dead", outcome.removeprefix("reject:")))
            elif outcome.startswith("unreachable:"):
                # the backend is down: no attempt counted; the whole drainer pauses
                unreachable = True
                outcomes.append((seq, "release", outcome.removeprefix("unreachable:")))
            else:
                outcomes.append((seq, "retry", outcome))
        if unreachable:
            self._unreachable_backoff = min(MAX_BACKOFF, max(0.25, self._unreachable_backoff * 2))
            self._unreachable_until = time.monotonic() + self._unreachable_backoff
        else:
            self._unreachable_backoff = 0.0
        self.outbox.record(outcomes)
        return sum(1 for _, what, _ in outcomes if what in ("sent", "dead"))

    def _send(self, payload: str) -> str | None:
        """None when delivered; 'reject:<reason>' for a permanent refusal; 'unreachable:<reason>' when the
        backend cannot be reached; else the retryable error of this event."""
        session = getattr(self._sessions, "session", None)
        if session is None:
            session = self._sessions.session = requests.Session()
        try:
            resp = session.post(self.endpoint, data=payload, headers=self.headers, timeout=self.timeout)
        except requests.RequestException as exc:
            return f"unreachable:{self.endpoint} unreachable: {exc.__class__.__name__}: {exc}"
        if 200 <= resp.status_code < 300:
            return None
        reason = f"HTTP {resp.status_code}: {resp.text[:1000]}"
        if resp.status_code in (401, 403):
            # the backend refuses our credentials, not the event: keep every event until they are fixed
            return (
                f"unreachable:{self.endpoint} refused the credentials ({reason}): set LINEAGE_LAB_MARQUEZ_API_KEY "
                "(or the lineage resource's api_key) to a key it accepts; the events stay queued"
            )
        if 400 <= resp.status_code < 500 and resp.status_code not in (408, 429):
            return "reject:" + reason
        return reason

    def flush(self, timeout: float = 30.0) -> bool:
        """Deliver (or dead-letter) everything queued, retrying as needed; False if events remain at timeout."""
        deadline = time.monotonic() + timeout
        self._unreachable_until = 0.0
        while time.monotonic() < deadline:
            if self.outbox.counts().queued == 0:
                return True
            if not self.drain_once():
                time.sleep(0.2)
        return self.outbox.counts().queued == 0


class LineageEmitter:
    """What producers use: ``emit`` returns as soon as the event is on disk.

    In the embedded stack one drainer process (the ``lineage-drainer`` service, ``lineage-lab lineage drain``)
    delivers for every producer, so producers only enqueue; ``drain_in_background=True`` runs a drainer thread in
    this process instead, for a producer that runs without that service.
    """

    def __init__(
        self,
        outbox_path: Path,
        url: str,
        *,
        drain_in_background: bool = False,
        workers: int = 4,
        api_key: str | None = None,
    ) -> None:
        self.outbox = Outbox(outbox_path)
        self.drainer = Drainer(self.outbox, url, workers=workers, api_key=api_key)
        if drain_in_background:
            self.drainer.start()

    def emit(self, event: RunEvent | dict | str) -> bool:
        queued = self.outbox.enqueue(event)
        self.drainer.wake()
        return queued

    def flush(self, timeout: float = 30.0) -> bool:
        return self.drainer.flush(timeout)

    def close(self) -> None:
        self.drainer.stop()

    def run_forever(self) -> None:
        """Drain until interrupted (the lineage-drainer service's main loop)."""
        self.drainer.start()
        try:
            while True:
                time.sleep(3600)
        finally:
            self.drainer.stop()
