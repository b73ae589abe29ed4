"""The Iceberg table iceberg-ingestion writes, created and evolved with pyiceberg (Flink DDL cannot declare
days(bid_time)). Its columns are the identity module's: a column declared there and missing from the table is added
by a schema update, which is metadata only (no data file is rewritten; older rows read it as null)."""

from __future__ import annotations

import re

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DecimalType, IcebergType, NestedField, StringType, TimestampType

from lineage_assets.lineage.identity import Dataset

PARTITION_COLUMN = "bid_time"
ORDERS_PROPERTIES = {
    "format-version": "2",
    "write.format.default": "parquet",
    # each snapshot's summary names the day partitions it changed (when at most this many): what the
    # supplier_stats partition sensor reads to know which days to recompute
    "write.summary.partition-limit": "400",
}


class TableSchemaError(RuntimeError):
    """The table and the identity module disagree in a way a schema update cannot fix."""


def iceberg_type(declared: str) -> IcebergType:
    """The Iceberg type of an identity-module column type of an Iceberg dataset."""
    if declared == "string":
        return StringType()
    if declared == "timestamp_ntz":
        return TimestampType()
    if m := re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", declared):
        return DecimalType(int(m[1]), int(m[2]))
    raise TableSchemaError(f"no Iceberg type for declared type {declared!r}; add it to {__name__}.iceberg_type")


def orders_schema(dataset: Dataset) -> Schema:
    return Schema(
        *(
            NestedField(i, c.name, iceberg_type(c.type), required=False, doc=c.description or None)
            for i, c in enumerate(dataset.columns, start=1)
        )
    )


def orders_spec(schema: Schema) -> PartitionSpec:
    return PartitionSpec(
        PartitionField(schema.find_field(PARTITION_COLUMN).field_id, 1000, DayTransform(), "bid_time_day")
    )


def ensure_orders_table(catalog, name: str, dataset: Dataset):
    """Create ``name`` (namespace.table) with the dataset's columns if missing; on an existing table add the declared
    columns it lacks and bring its properties up to date. Returns (table, the columns added)."""
    namespace = name.split(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    if not catalog.table_exists(name):
        schema = orders_schema(dataset)
        catalog.create_table(name, schema, partition_spec=orders_spec(schema), properties=ORDERS_PROPERTIES)
        return catalog.load_table(name), ()
    table = catalog.load_table(name)
    have = {f.name: f for f in table.schema().fields}
    changed = {
        c.name: (str(have[c.name].field_type), c.type)
        for c in dataset.columns
        if c.name in have and have[c.name].field_type != iceberg_type(c.type)
    }
    if changed:
        raise TableSchemaError(
            f"Iceberg table {name} has columns of other types than declared (table, declared): {changed}; "
            "widen them with a schema update, or change the declaration in lineage_assets/lineage/identity.py"
        )
    added = tuple(c.name for c in dataset.columns if c.name not in have)
    if added:
        with table.update_schema() as update:
            for c in dataset.columns:
                if c.name in added:
                    update.add_column(c.name, iceberg_type(c.type), doc=c.description or None)
        table = catalog.load_table(name)
    missing = {k: v for k, v in ORDERS_PROPERTIES.items() if k != "format-version" and table.properties.get(k) != v}
    if missing:
        with table.transaction() as tx:
            tx.set_properties(missing)
        table = catalog.load_table(name)
    return table, added
