"""The schema guard in the real source database: dropping a column the Flink jobs read, or narrowing its type, is
refused by PostgreSQL itself with the readers and what to do, and the table keeps the column; adding a column (a
compatible change) is not refused."""

from __future__ import annotations

import dagster as dg
import psycopg
import pytest

from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key

SETTINGS = StackSettings.from_env()
defs = build_definitions(SETTINGS)
pipeline = Pipeline.from_settings(SETTINGS)


@pytest.fixture(scope="module")
def guarded():
    result = dg.materialize(
        [*defs.assets], selection=[asset_key(pipeline.dataset("source_orders"))], resources=defs.resources
    )
    (materialization,) = result.asset_materializations_for_node("postgres__orders_source__orders")
    assert str(materialization.metadata["schema_guard"].value).startswith("installed"), materialization.metadata
    return defs.resources["source_db"]


def columns(source_db) -> dict[str, str]:
    with source_db.connect() as conn:
        rows = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name = 'orders'"
        ).fetchall()
    return dict(rows)


def test_dropping_a_column_the_flink_jobs_read_is_refused_with_its_readers(guarded):
    with guarded.connect() as conn, pytest.raises(psycopg.errors.RaiseException) as refused:
        conn.execute("ALTER TABLE public.orders DROP COLUMN item")
    message = str(refused.value)
    assert "refuses to drop column item of public.orders" in message
    assert "iceberg-ingestion -> iceberg/default/orders.item" in message
    assert "orders-s3-sink -> s3/orders_archive.item" in message
    assert "lineage-lab impact" in (refused.value.diag.message_hint or "")
    assert "item" in columns(guarded), "the column is still there"


def test_narrowing_a_read_column_is_refused(guarded):
    with guarded.connect() as conn, pytest.raises(psycopg.errors.RaiseException) as refused:
        conn.execute("ALTER TABLE public.orders ALTER COLUMN price TYPE varchar(64)")
    assert "refuses to change column price of public.orders from text to character varying(64)" in str(refused.value)
    assert columns(guarded)["price"] == "text"


def test_adding_a_column_is_not_refused(guarded):
    with guarded.connect() as conn, conn.transaction() as tx:
        conn.execute("ALTER TABLE public.orders ADD COLUMN coupon text")
        added = conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'orders' AND column_name = 'coupon'"
        ).fetchone()
        raise psycopg.Rollback(tx)  # proven; nothing changes for the tests after this one
    assert added, "adding a column was not refused"
    assert "coupon" not in columns(guarded)


def test_the_optional_currency_with_another_type_is_refused(guarded):
    """currency is declared text: adding it (or, once added, retyping it) as integer is refused like any retype."""
    statement = (
        "ALTER TABLE public.orders ALTER COLUMN currency TYPE integer USING NULL"
        if "currency" in columns(guarded)
        else "ALTER TABLE public.orders ADD COLUMN currency integer"
    )
    with guarded.connect() as conn, pytest.raises(psycopg.errors.RaiseException) as refused:
        conn.execute(statement)
    assert "column currency of public.orders from text to integer" in str(refused.value)
    assert "iceberg-ingestion -> iceberg/default/orders.currency" in str(refused.value)
    assert columns(guarded).get("currency", "text") == "text"
