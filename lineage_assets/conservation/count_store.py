"""What reconciliation remembers between runs, so that each run reads only what is new: how many records a Kafka
partition held up to an offset (and the sum of a column's values there), and what each archive object contains. One
SQLite file, shared by the CLI and Dagster's checks (WAL, so a reader never waits for a writer). Losing it costs one
full recount, never a wrong figure: every entry is a fact about data that cannot change (committed records below an
offset, an object with a given ETag).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.file_lock import held

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kafka_marks (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL, records INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, offset)
);
CREATE TABLE IF NOT EXISTS kafka_scans (
    name TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (name, topic, partition)
);
CREATE TABLE IF NOT EXISTS kafka_sums (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, measure TEXT NOT NULL, offset INTEGER NOT NULL,
    records INTEGER NOT NULL, total TEXT NOT NULL,
    PRIMARY KEY (topic, partition, measure, offset)
);
CREATE TABLE IF NOT EXISTS facts (
    kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (kind, key)
);
"""


class Busy(RuntimeError):
    """Another process is reconciling the same hop now."""


class CountStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            with db:
                yield db
        finally:
            db.close()

    @contextmanager
    def locked(self, name: str, timeout: float | None = None) -> Iterator[None]:
        """Exclusive, across processes, for ``name`` (one hop): a reader's remembered state is read, brought up to
        date and written back as one step. Two at once (a sensor tick, the check schedule, the CLI) would each
        resume a shared scan position the other moved, and skip records. ``timeout``: raise ``Busy`` after that
        many seconds instead of waiting on (a sensor tick must stay short)."""
        with held(self.path.with_name(f"{self.path.name}.{name}.lock"), timeout, lambda: Busy(name)):
            yield

    # Kafka: (topic, partition, offset) -> committed records in [log start ever seen, offset) ------------------
    def mark_below(self, topic: str, partition: int, offset: int) -> tuple[int, int] | None:
        """The highest mark at or below ``offset``: (its offset, records below it)."""
        with self._db() as db:
            row = db.execute(
                "SELECT offset, records FROM kafka_marks WHERE topic=? AND partition=? AND offset<=? "
                "ORDER BY offset DESC LIMIT 1",
                (topic, partition, offset),
            ).fetchone()
        return (row[0], row[1]) if row else None

    def first_mark(self, topic: str, partition: int) -> tuple[int, int] | None:
        with self._db() as db:
            row = db.execute(
                "SELECT offset, records FROM kafka_marks WHERE topic=? AND partition=? ORDER BY offset LIMIT 1",
                (topic, partition),
            ).fetchone()
        return (row[0], row[1]) if row else None

    def add_marks(self, topic: str, partition: int, marks: list[tuple[int, int]], keep: int = 64) -> None:
        """Record (offset, records below it) marks, keeping the newest ``keep`` and the first one."""
        with self._db() as db:
            db.executemany(
                "INSERT OR REPLACE INTO kafka_marks VALUES (?, ?, ?, ?)",
                [(topic, partition, o, r) for o, r in marks],
            )
            db.execute(
                "DELETE FROM kafka_marks WHERE topic=? AND partition=? AND offset NOT IN ("
                " SELECT offset FROM kafka_marks WHERE topic=? AND partition=? ORDER BY offset DESC LIMIT ?)"
                " AND offset <> (SELECT MIN(offset) FROM kafka_marks WHERE topic=? AND partition=?)",
                (topic, partition, topic, partition, keep, topic, partition),
            )

    # Kafka sums: (topic, partition, measure, offset) -> (records, sum of the measure's units) below the offset ------
    def sum_mark_below(self, topic: str, partition: int, measure: str, offset: int) -> tuple[int, int, int] | None:
        """The highest sum mark at or below ``offset``: (its offset, records below it, their total)."""
        with self._db() as db:
            row = db.execute(
                "SELECT offset, records, total FROM kafka_sums WHERE topic=? AND partition=? AND measure=? "
                "AND offset<=? ORDER BY offset DESC LIMIT 1",
                (topic, partition, measure, offset),
            ).fetchone()
        return (row[0], row[1], int(row[2])) if row else None

    def first_sum_mark(self, topic: str, partition: int, measure: str) -> tuple[int, int, int] | None:
        with self._db() as db:
            row = db.execute(
                "SELECT offset, records, total FROM kafka_sums WHERE topic=? AND partition=? AND measure=? "
                "ORDER BY offset LIMIT 1",
                (topic, partition, measure),
            ).fetchone()
        return (row[0], row[1], int(row[2])) if row else None

    def add_sum_marks(
        self, topic: str, partition: int, measure: str, marks: list[tuple[int, int, int]], keep: int = 64
    ) -> None:
        """Record (offset, records, total below it) marks, keeping the newest ``keep`` and the first one."""
        with self._db() as db:
            db.executemany(
                "INSERT OR REPLACE INTO kafka_sums VALUES (?, ?, ?, ?, ?, ?)",
                [(topic, partition, measure, o, r, str(t)) for o, r, t in marks],
            )
            db.execute(
                "DELETE FROM kafka_sums WHERE topic=? AND partition=? AND measure=? AND offset NOT IN ("
                " SELECT offset FROM kafka_sums WHERE topic=? AND partition=? AND measure=? ORDER BY offset DESC"
                " LIMIT ?) AND offset <> (SELECT MIN(offset) FROM kafka_sums WHERE topic=? AND partition=?"
                " AND measure=?)",
                (topic, partition, measure, topic, partition, measure, keep, topic, partition, measure),
            )

    def scan_position(self, name: str, topic: str, partition: int) -> int | None:
        with self._db() as db:
            row = db.execute(
                "SELECT offset FROM kafka_scans WHERE name=? AND topic=? AND partition=?", (name, topic, partition)
            ).fetchone()
        return row[0] if row else None

    def set_scan_position(self, name: str, topic: str, partition: int, offset: int) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO kafka_scans VALUES (?, ?, ?, ?)", (name, topic, partition, offset))

    # Facts: anything else a reader wants to keep (kind, key) -> JSON text --------------------------------------
    def facts(self, kind: str) -> dict[str, str]:
        with self._db() as db:
            return dict(db.execute("SELECT key, value FROM facts WHERE kind=?", (kind,)).fetchall())

    def put_facts(self, kind: str, values: dict[str, str]) -> None:
        with self._db() as db:
            db.executemany("INSERT OR REPLACE INTO facts VALUES (?, ?, ?)", [(kind, k, v) for k, v in values.items()])

    def drop_facts(self, kind: str, keys: list[str]) -> None:
        with self._db() as db:
            db.executemany("DELETE FROM facts WHERE kind=? AND key=?", [(kind, k) for k in keys])
