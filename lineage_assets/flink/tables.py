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
ORDERS_PROPERTIES = {
    "format-version": "2",
    "write.format.default": "parquet",
    # each snapshot's summary names the day partitions it changed (when at most this many): what the
    # supplier_stats partition sensor reads to know which days to recompute
    "write.summary.partition-limit": "400",
}


def ensure_orders_table(catalog, name: str):
    """Create ``name`` (namespace.table) if missing, or bring an existing one's properties up to date; return it."""
    namespace = name.split(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    if not catalog.table_exists(name):
        catalog.create_table(name, ORDERS_SCHEMA, partition_spec=ORDERS_SPEC, properties=ORDERS_PROPERTIES)
    table = catalog.load_table(name)
    missing = {k: v for k, v in ORDERS_PROPERTIES.items() if k != "format-version" and table.properties.get(k) != v}
    if missing:
        with table.transaction() as tx:
            tx.set_properties(missing)
        table = catalog.load_table(name)
    return table
