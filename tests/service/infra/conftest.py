"""Fixtures of the infra service tests: one Iceberg table that Spark writes, shared by the Spark, pyiceberg and
Flink read tests."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from infra.services.iceberg_catalog import load_catalog
from infra.spark import build_session

ROWS = [
    ("o-1", "Lamp", Decimal("12.50"), "Alice", dt.datetime(2025, 5, 1, 10, 0, 0)),
    ("o-2", "Desk", Decimal("149.99"), "Bob", dt.datetime(2025, 5, 1, 11, 30, 0)),
    ("o-3", "Pen", Decimal("1.00"), "Alice", dt.datetime(2025, 5, 2, 9, 15, 0)),
]


@pytest.fixture(scope="session")
def spark_table(settings, tmp_path_factory):
    """(rows Spark reads back, namespace, OpenLineage events file) of a fresh namespace holding table ``orders``.

    The Spark session is stopped before the tests run: one process has one SparkContext, and later tests (the
    supplier_stats asset) need their own, with their own OpenLineage listener settings."""
    namespace = f"smoke_{uuid.uuid4().hex[:8]}"
    events = tmp_path_factory.mktemp("openlineage") / "events.ndjson"
    spark = build_session(
        settings,
        "iceberg-smoke",
        openlineage={
            "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": str(events),
            "spark.openlineage.transport.append": "true",
            "spark.openlineage.namespace": "lineage-lab-tests",
        },
    )
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spark.sql(
        f"""CREATE TABLE {namespace}.orders (order_id string, item string, price decimal(10,2), supplier string,
            bid_time timestamp_ntz) USING iceberg PARTITIONED BY (days(bid_time))
            TBLPROPERTIES ('format-version'='2', 'write.format.default'='parquet')"""
    )
    spark.createDataFrame(
        ROWS, "order_id string, item string, price decimal(10,2), supplier string, bid_time timestamp_ntz"
    ).writeTo(f"{namespace}.orders").append()
    read_back = [tuple(r) for r in spark.sql(f"SELECT * FROM {namespace}.orders").collect()]
    spark.stop()
    yield read_back, namespace, events
    catalog = load_catalog(settings)
    catalog.purge_table(f"{namespace}.orders")
    catalog.drop_namespace(namespace)
