"""The Iceberg table iceberg-ingestion writes, created with pyiceberg (Flink DDL cannot declare days(bid_time))."""

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DecimalType, NestedField, StringType, TimestampType

ORDERS_SCHEMA = Schema(
    NestedField(1, "order_id", StringType(), required=False),
    NestedField(2, "item", StringType(), required=False),
    NestedField(3, "price", DecimalType(10, 2), required=False),
    NestedField(4, "supplier", StringType(), required=False),
    NestedField(5, "bid_time", TimestampType(), required=False, doc="UTC"),
)
ORDERS_SPEC = PartitionSpec(PartitionField(5, 1000, DayTransform(), "bid_time_day"))
ORDERS_PROPERTIES = {"format-version": "2", "write.format.default": "parquet"}


def ensure_orders_table(catalog, name: str):
    """Create ``name`` (namespace.table) if missing; return the table."""
    namespace = name.split(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    if not catalog.table_exists(name):
        catalog.create_table(name, ORDERS_SCHEMA, partition_spec=ORDERS_SPEC, properties=ORDERS_PROPERTIES)
    return catalog.load_table(name)
