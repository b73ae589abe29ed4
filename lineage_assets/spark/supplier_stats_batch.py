"""The supplier_stats asset: per supplier and hour of one day, total price and count of the Iceberg orders,
written to Iceberg default.supplier_stats. Daily partitions: materializing a day replaces that day's rows only."""

import datetime as dt
from dataclasses import dataclass

import dagster as dg

from infra.services.iceberg_catalog import CATALOG_NAME
from lineage_assets.freshness import daily_batch
from lineage_assets.lineage.dagster_runs import dagster_parent_run
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key, column_lineage, identity_metadata, table_schema
from lineage_assets.spark.lineage import RunStatistics, forward_events
from lineage_assets.spark.resource import LineageSparkResource
from lineage_assets.storage import IcebergResource

#: Dagster concurrency pool of the Spark runs: the stack's instance runs one at a time (infra/services/dagster.py),
#: so the sensor, the schedule and a backfill never write the same day at once, and two JVMs never share 2 cores
SPARK_POOL = "spark"

#: Iceberg's refusals of a commit that raced another writer of the same day (Java exception names in the error)
COMMIT_CONFLICTS = ("org.apache.iceberg.exceptions.ValidationException", "org.apache.iceberg.exceptions.CommitFailed")

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", timezone="UTC", end_offset=1)

CREATE_TARGET = """
CREATE TABLE IF NOT EXISTS {table} (
    supplier string, bid_date date, bid_hour int, total_price decimal(10,2), total_count bigint
) USING iceberg PARTITIONED BY (bid_date, bid_hour)
TBLPROPERTIES ('format-version'='2', 'write.format.default'='parquet')
"""


class SupplierStatsConfig(dg.Config):
    """Catalog names of the tables (defaults: the identity module's); override only for another deployment."""

    source_table: str = ""
    target_table: str = ""


def day_orders(spark, table: str, day: str, snapshot_id: int | None = None):
    """The orders whose bid_time (UTC) falls on ``day``, at ``snapshot_id`` when given: every action of the run
    then reads the same orders, the ones the commit says it read (Flink commits to the table every checkpoint)."""
    version = f" VERSION AS OF {int(snapshot_id)}" if snapshot_id is not None else ""
    return spark.sql(
        f"SELECT * FROM {table}{version} WHERE bid_time >= TIMESTAMP_NTZ '{day} 00:00:00' "
        f"AND bid_time < TIMESTAMP_NTZ '{day} 00:00:00' + INTERVAL 1 DAY"
    )


#: prefix of the snapshot properties the Spark job writes into each commit of a day (conservation/spark_days.py
#: reads them back): what the engine read and wrote, in the commit itself
PROPERTY_PREFIX = "lineage-lab."
#: snapshot id of orders when the table had no snapshot yet (nothing to read)
NO_SNAPSHOT = "none"


def commit_properties(
    day: str, input_snapshot: int | None, input_rows: int, rejected: int, output_rows: int, output_orders: int
) -> dict[str, str]:
    """The properties of a day's commit: the day, the orders snapshot read, the day's orders read, the refused
    ones, the supplier_stats rows written and the orders they sum (``input_rows - rejected``)."""
    values = {
        "day": day,
        "input-snapshot-id": NO_SNAPSHOT if input_snapshot is None else str(input_snapshot),
        "input-rows": str(input_rows),
        "rejected-orders": str(rejected),
        "output-rows": str(output_rows),
        "output-orders": str(output_orders),
    }
    return {PROPERTY_PREFIX + k: v for k, v in values.items()}


def day_counts(orders) -> tuple[int, int, int]:
    """(orders read, orders refused, supplier_stats rows the valid ones make) in one Spark action."""
    from pyspark.sql import functions as F

    # the rule is a JVM call Spark deems non-deterministic: evaluated in a projection, never inside an aggregate
    judged = orders.select("supplier", "bid_time", rule_reason().alias("reason"))
    valid = F.col("reason") == ""
    row = judged.agg(
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum(F.when(valid, 0).otherwise(1)), F.lit(0)).alias("rejected"),
        F.countDistinct(F.when(valid, F.struct(F.col("supplier"), F.hour("bid_time")))).alias("groups"),
    ).collect()[0]
    return int(row["rows"]), int(row["rejected"]), int(row["groups"])


#: the one rule for a valid order, in the JVM (flink_jobs/order-functions): its clock-free part, for stored rows
ORDER_RULE = "lab.lineage.orders.OrderRule"


def rule_reason():
    """Why a stored order breaks the one rule, '' for a valid one: the rule's own code, called per row."""
    from pyspark.sql import functions as F

    return F.expr(
        f"java_method('{ORDER_RULE}', 'storedRowRejection', order_id, supplier, CAST(price AS STRING), "
        "CAST(bid_time AS STRING))"
    )


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


def short(table: str) -> str:
    """The catalog's name of a table (``default.orders``) from Spark's (``lakehouse.default.orders``)."""
    return table.removeprefix(CATALOG_NAME + ".")


@dataclass(frozen=True)
class ReadPoint:
    """The orders snapshot a run reads (None: the table has none yet) and the bytes of the day's data files in it."""

    snapshot_id: int | None
    day_bytes: int | None


def read_point(orders_table, day: str) -> ReadPoint:
    """Pin the run to the current orders snapshot (read with pyiceberg: a Spark metadata query would be one more
    input in the lineage); the day's files are planned from the manifests (pruned by partition), not read."""
    snapshot = orders_table.current_snapshot()
    if snapshot is None:
        return ReadPoint(None, 0)
    end = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
    try:
        tasks = orders_table.scan(
            row_filter=f"bid_time >= '{day}T00:00:00' and bid_time < '{end}T00:00:00'",
            snapshot_id=snapshot.snapshot_id,
        ).plan_files()
    except ValueError:  # not an orders table (a misconfigured source): Spark's own analysis says what is wrong
        return ReadPoint(snapshot.snapshot_id, None)
    return ReadPoint(snapshot.snapshot_id, sum(t.file.file_size_in_bytes for t in tasks))


def summary_of(snapshot) -> dict[str, str]:
    """A snapshot's summary properties (engine's and ours), without the operation."""
    return dict(snapshot.summary.additional_properties) if snapshot is not None and snapshot.summary else {}


def written_snapshot(target_table, app_id: str, day: str):
    """This application's commit of ``day`` (the newest snapshot carrying both), not whatever is current now."""
    for snapshot in sorted(target_table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True):
        summary = summary_of(snapshot)
        if summary.get("spark.app.id") == app_id and summary.get(PROPERTY_PREFIX + "day") == day:
            return snapshot
    return None


def build_supplier_stats_asset(pipeline: Pipeline) -> dg.AssetsDefinition:
    target = pipeline.dataset("iceberg_supplier_stats")
    source = pipeline.dataset("iceberg_orders")

    @dg.asset(
        key=asset_key(target),
        deps=[asset_key(source)],
        partitions_def=DAILY,
        description=f"{target.description}. Spark batch job `{target.producer}`; a day's materialization replaces "
        "that day's rows only.",
        kinds={"spark", "iceberg"},
        owners=["team:data-platform"],
        group_name="batch",
        metadata=identity_metadata(pipeline, target),
        freshness_policy=daily_batch(),
        pool=SPARK_POOL,
    )
    def supplier_stats(
        context: dg.AssetExecutionContext,
        config: SupplierStatsConfig,
        spark: LineageSparkResource,
        lineage: LineageResource,
        iceberg: IcebergResource,
    ) -> dg.MaterializeResult:
        from pyspark.sql import functions as F

        day = context.partition_key
        # the catalog names of the two tables: their identity's catalog symlink
        source_table = f"{CATALOG_NAME}.{config.source_table or source.symlinks[0].name}"
        target_table = f"{CATALOG_NAME}.{config.target_table or target.symlinks[0].name}"
        session = spark.spark_session
        emitter = lineage.emitter()
        # the Dagster run is the Spark application's OpenLineage parent: opened here, closed however this ends
        with dagster_parent_run(context, pipeline, emitter):
            error: BaseException | None = None
            statistics: RunStatistics | None = None
            try:
                if not session.catalog.tableExists(source_table):
                    raise dg.Failure(
                        f"Iceberg table {source_table.removeprefix(CATALOG_NAME + '.')} does not exist: materialize "
                        f"{asset_key(source).to_user_string()} (the {source.producer} Flink job) first",
                        allow_retries=False,
                    )
                session.sql(CREATE_TARGET.format(table=target_table))
                read = read_point(iceberg.catalog().load_table(short(source_table)), day)
                # Spark's catalog cached the table when tableExists loaded it: a snapshot Flink committed since then
                # (the one just pinned) is unknown to that copy ("Cannot find snapshot with ID ...")
                session.catalog.refreshTable(source_table)
                orders = day_orders(session, source_table, day, read.snapshot_id)
                input_rows, rejected, output_rows = day_counts(orders)
                stats = aggregate(orders)
                writer = stats.writeTo(target_table)
                properties = commit_properties(
                    day, read.snapshot_id, input_rows, rejected, output_rows, input_rows - rejected
                )
                for key, value in properties.items():
                    writer = writer.option(f"snapshot-property.{key}", value)
                writer.overwrite(F.col("bid_date") == F.lit(day).cast("date"))
                app_id = session.sparkContext.applicationId
                written = written_snapshot(iceberg.catalog().load_table(short(target_table)), app_id, day)
                added = summary_of(written)
                statistics = RunStatistics(
                    (source.namespace, source.name),
                    (target.namespace, target.name),
                    input_rows=input_rows,
                    input_bytes=read.day_bytes,
                    output_rows=int(added.get("added-records", output_rows)),
                    # an overwrite that adds nothing (a day without orders) adds no bytes
                    output_bytes=int(added.get("added-files-size", 0)) if written is not None else None,
                )
            except dg.Failure as exc:
                error = exc
                raise
            except Exception as exc:
                error = exc
                if any(name in str(exc) for name in COMMIT_CONFLICTS):
                    # another run (by hand, outside the stack's queue) wrote the same day first: do it again on top
                    raise dg.RetryRequested(max_retries=2, seconds_to_wait=10) from exc
                raise dg.Failure(
                    f"Spark job {target.producer} failed for {day}: {type(exc).__name__}: {str(exc).splitlines()[0]} "
                    "(its OpenLineage run is reported as FAIL)"
                ) from exc
            finally:
                session.stop()  # ends the application: the listener writes the application's terminal event
                queued = forward_events(
                    spark.events_path, emitter, target.producer, spark.parent_job_name, error, statistics
                )
                context.log.info(f"queued {len(queued)} OpenLineage events of the Spark listener")
        # table facts read with pyiceberg, not Spark: a Spark read would be one more input in the lineage
        table = iceberg.catalog().load_table(short(target_table))
        rows = table.scan(row_filter=f"bid_date = '{day}'", selected_fields=("supplier",)).to_arrow().num_rows
        snapshot = written.snapshot_id if written else table.current_snapshot().snapshot_id
        location = table.location()
        return dg.MaterializeResult(
            metadata={
                "dagster/row_count": rows,
                "dagster/column_schema": table_schema(target),
                "dagster/column_lineage": column_lineage(pipeline, target),
                "rejected_orders": rejected,
                "input_orders": input_rows,
                "iceberg/input_snapshot_id": str(read.snapshot_id),
                "partition": day,
                "iceberg/snapshot_id": str(snapshot),
                "dagster/uri": location,
                "spark/application_id": app_id,
                "marquez/job": f"{target.producer} (parent: run {spark.parent[0]} of job {spark.parent[1]})",
                "openlineage/events_queued": len(queued),
            }
        )

    return supplier_stats
