"""The Spark side of one supplier_stats day: the orders it reads (the whole day at a snapshot, or only what was
appended between two), the one rule that refuses an order, the hourly totals, and the merge of new totals into the
day's rows. Sums and counts add exactly, so totals of the new orders merged into the day's rows equal totals of
the whole day."""

from __future__ import annotations

from dataclasses import dataclass

#: the table supplier_stats is created as when it does not exist (Spark SQL)
CREATE_TARGET = """
CREATE TABLE IF NOT EXISTS {table} (
    supplier string, bid_date date, bid_hour int, total_price decimal(10,2), total_count bigint
) USING iceberg PARTITIONED BY (bid_date, bid_hour)
TBLPROPERTIES ('format-version'='2', 'write.format.default'='parquet')
"""
#: the columns of supplier_stats as Spark's DDL, for the day's rows read back with pyiceberg
STATS_DDL = "supplier string, bid_date date, bid_hour int, total_price decimal(10,2), total_count bigint"
#: the one rule for a valid order, in the JVM (flink_jobs/order-functions): its clock-free part, for stored rows
ORDER_RULE = "lab.lineage.orders.OrderRule"


def day_predicate(day: str) -> str:
    """Orders whose bid_time (UTC, a timestamp without zone) falls on ``day``."""
    return f"bid_time >= TIMESTAMP_NTZ '{day} 00:00:00' AND bid_time < TIMESTAMP_NTZ '{day} 00:00:00' + INTERVAL 1 DAY"


def day_orders(spark, table: str, day: str, snapshot_id: int | None = None):
    """The orders of ``day``, at ``snapshot_id`` when given: every action of the run then reads the same orders,
    the ones the commit says it read (Flink commits to the table every checkpoint)."""
    version = f" VERSION AS OF {int(snapshot_id)}" if snapshot_id is not None else ""
    return spark.sql(f"SELECT * FROM {table}{version} WHERE {day_predicate(day)}")


def day_increment(spark, table: str, day: str, start: int, end: int):
    """The orders of ``day`` appended after snapshot ``start`` up to ``end`` (Iceberg's incremental append scan:
    only the data files the ``append`` snapshots between them added; the caller made sure no other kind of
    snapshot changed the day)."""
    reader = spark.read.format("iceberg").option("start-snapshot-id", str(start)).option("end-snapshot-id", str(end))
    return reader.load(table).where(day_predicate(day))


def rule_reason():
    """Why a stored order breaks the one rule, '' for a valid one: the rule's own code, called per row."""
    from pyspark.sql import functions as F

    return F.expr(
        f"java_method('{ORDER_RULE}', 'storedRowRejection', order_id, supplier, CAST(price AS STRING), "
        "CAST(bid_time AS STRING))"
    )


@dataclass(frozen=True)
class ReadCounts:
    """What one read held: its orders, the refused ones, and the (supplier, hour) groups of the valid ones."""

    rows: int
    rejected: int
    groups: frozenset[tuple[str, int]]
    #: the refused orders' prices summed, in cents: what conservation weighs as the day's dead letters
    rejected_cents: int = 0


def read_counts(orders) -> ReadCounts:
    """The counts of a read in one Spark action (a day has at most suppliers x 24 groups)."""
    from pyspark.sql import functions as F

    # the rule is a JVM call Spark deems non-deterministic: evaluated in a projection, never inside an aggregate
    judged = orders.select("supplier", "bid_time", "price", rule_reason().alias("reason"))
    valid = F.col("reason") == ""
    cents = F.coalesce(F.col("price"), F.lit(0)) * 100
    row = judged.agg(
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum(F.when(valid, 0).otherwise(1)), F.lit(0)).alias("rejected"),
        F.coalesce(F.sum(F.when(valid, F.lit(0)).otherwise(cents)), F.lit(0)).cast("bigint").alias("rejected_cents"),
        F.collect_set(F.when(valid, F.struct(F.col("supplier"), F.hour("bid_time").alias("hour")))).alias("groups"),
    ).collect()[0]
    groups = frozenset((g["supplier"], int(g["hour"])) for g in row["groups"])
    return ReadCounts(int(row["rows"]), int(row["rejected"]), groups, int(row["rejected_cents"]))


def aggregate(orders):
    """Hourly totals per supplier of the valid orders (``rule_reason`` empty); the caller counts the others."""
    from pyspark.sql import functions as F

    valid = orders.where(rule_reason() == "")
    return valid.groupBy(
        F.col("supplier"),
        F.to_date("bid_time").alias("bid_date"),
        F.hour("bid_time").cast("int").alias("bid_hour"),
    ).agg(
        F.sum("price").cast("decimal(10,2)").alias("total_price"),
        F.count(F.lit(1)).cast("bigint").alias("total_count"),
    )


def merge(base, increment):
    """The day's rows (``base``) with the totals of the new orders added, per supplier and hour. A total that
    overflowed decimal(10,2) is NULL in the base (Spark without ANSI mode) and stays NULL, as a whole-day run
    would give; ``sum`` alone would skip it."""
    from pyspark.sql import functions as F

    overflowed = F.max(F.col("total_price").isNull().cast("int")) == 1
    return (
        base.unionByName(increment)
        .groupBy("supplier", "bid_date", "bid_hour")
        .agg(
            F.when(overflowed, F.lit(None)).otherwise(F.sum("total_price")).cast("decimal(10,2)").alias("total_price"),
            F.sum("total_count").cast("bigint").alias("total_count"),
        )
    )
