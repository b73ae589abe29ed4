"""The Iceberg orders table is built from the identity module's columns (pure schema logic; the evolution of a
real table is a service test in tests/service/lineage_assets/test_schema_evolution.py)."""

import pytest
from pyiceberg.types import DecimalType, StringType, TimestampType

from infra.settings import StackSettings
from lineage_assets.flink.tables import TableSchemaError, iceberg_type, orders_schema, orders_spec
from lineage_assets.lineage.identity import Pipeline


def test_the_table_schema_is_the_declared_columns_in_order_all_nullable():
    declared = Pipeline.from_settings(StackSettings()).dataset("iceberg_orders")
    schema = orders_schema(declared)
    assert [(f.name, f.required) for f in schema.fields] == [
        ("order_id", False),
        ("item", False),
        ("price", False),
        ("supplier", False),
        ("bid_time", False),
        ("currency", False),
    ]
    assert schema.find_field("price").field_type == DecimalType(10, 2)
    assert schema.find_field("bid_time").field_type == TimestampType()
    assert schema.find_field("currency").field_type == StringType()
    (day,) = orders_spec(schema).fields
    assert day.source_id == schema.find_field("bid_time").field_id and str(day.transform) == "day"


def test_an_undeclarable_type_is_a_clear_error():
    with pytest.raises(TableSchemaError, match="no Iceberg type for declared type 'geometry'"):
        iceberg_type("geometry")
