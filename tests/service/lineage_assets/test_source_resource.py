"""The source database resource against the stack's PostgreSQL: a statement that runs past the resource's limit is
cancelled by the server (a stalled query is an error, never a wait without end)."""

from __future__ import annotations

import psycopg
import pytest

from lineage_assets.resources import build_resources


def test_a_statement_past_the_limit_is_cancelled_by_the_server(settings):
    source_db = build_resources(settings)["source_db"]
    with source_db.connect() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "1min", "the default limit: 60 s"
    strict = source_db.model_copy(update={"statement_timeout_s": 1})
    with strict.connect() as conn, pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
        conn.execute("SELECT pg_sleep(5)")
