"""What the schema guard protects and what it tells: every source column some job reads downstream, with the jobs
and the columns derived from it (from the declared column lineage, followed to the end)."""

from infra.settings import StackSettings
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.source.schema_guard import install_sql, readers

PIPELINE = Pipeline.from_settings(StackSettings())


def test_readers_follow_column_lineage_to_the_last_job():
    found = readers(PIPELINE)
    assert set(found) == {"supplier", "item", "price", "bid_time", "order_id", "currency"}, "every column flows on"
    assert "iceberg-ingestion -> iceberg/default/orders.item" in found["item"]
    price = found["price"]
    assert "supplier-stats -> kafka/supplier_stats.total_price" in price
    assert "dagster.supplier_stats -> iceberg/default/supplier_stats.total_price" in price, "two hops away"


def test_the_sql_names_the_readers_and_escapes_quotes():
    sql = install_sql({"it'em": ["a job -> x.it'em"]}, {"it'em": "text"})
    assert "it''em" in sql and "it'em\"" not in sql
    assert "ON sql_drop WHEN TAG IN ('ALTER TABLE')" in sql
    assert "ON ddl_command_end WHEN TAG IN ('ALTER TABLE')" in sql
