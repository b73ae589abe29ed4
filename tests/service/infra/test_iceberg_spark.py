"""One Iceberg table, written by Spark through the REST catalog, read back by pyiceberg (and by Flink SQL in
test_flink.py). Spark's OpenLineage listener must name the table by its physical location."""

from __future__ import annotations

import json

from infra.services.iceberg_catalog import load_catalog
from tests.service.infra.conftest import ROWS


def test_spark_reads_back_what_it_wrote(spark_table):
    read_back, _, _ = spark_table
    assert sorted(read_back) == sorted(ROWS)


def test_pyiceberg_reads_the_same_rows_through_the_same_catalog(spark_table, settings):
    _, namespace, _ = spark_table
    table = load_catalog(settings).load_table(f"{namespace}.orders")
    assert table.format_version == 2
    assert table.location() == f"s3://{settings.warehouse_bucket}/{namespace}/orders"
    rows = sorted(
        (r["order_id"], r["item"], r["price"], r["supplier"], r["bid_time"])
        for r in table.scan().to_arrow().to_pylist()
    )
    assert rows == sorted(ROWS)


def test_openlineage_names_the_table_by_location_with_the_catalog_as_symlink(spark_table, settings):
    _, namespace, events = spark_table
    outputs = [
        out
        for line in events.read_text().splitlines()
        for out in json.loads(line).get("outputs", [])
        if out["name"].endswith("/orders")
    ]
    assert outputs, "the listener reported no output for the table"
    identities = {(o["namespace"], o["name"]) for o in outputs}
    assert identities == {(f"s3://{settings.warehouse_bucket}", f"{namespace}/orders")}
    symlinks = {
        (s["namespace"], s["name"], s["type"])
        for o in outputs
        for s in o.get("facets", {}).get("symlinks", {}).get("identifiers", [])
    }
    assert (settings.iceberg_catalog_url, f"{namespace}.orders", "TABLE") in symlinks
