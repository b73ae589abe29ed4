"""The supplier_stats asset: per supplier and hour of one day, total price and count of the Iceberg orders,
written to Iceberg default.supplier_stats. Daily partitions: materializing a day replaces that day's rows only."""

import dagster as dg

from infra.services.iceberg_catalog import CATALOG_NAME
from lineage_assets.freshness import daily_batch
from lineage_assets.lineage.dagster_runs import dagster_parent_run
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key, column_lineage, identity_metadata, table_schema
from lineage_assets.spark.day_write import short, summary_of, write_day
from lineage_assets.spark.increment import FULL, MODES
from lineage_assets.spark.lineage import RunStatistics, forward_events
from lineage_assets.spark.partitions import DAILY
from lineage_assets.spark.resource import LineageSparkResource
from lineage_assets.storage import IcebergResource

#: Dagster concurrency pool of the Spark runs: the stack's instance runs one at a time (infra/services/dagster.py),
#: so the sensor, the schedule and a backfill never write the same day at once, and two JVMs never share 2 cores
SPARK_POOL = "spark"


class SupplierStatsConfig(dg.Config):
    """How a run reads, and the catalog names of the tables (defaults: the identity module's; override only for
    another deployment)."""

    #: ``full`` recomputes the whole day (a backfill, the finalise schedule, a run by hand); ``incremental`` (the
    #: new-orders sensor's runs) adds only the orders appended since the day's last write, unless something else
    #: changed the day, and then the run is full and says why
    mode: str = FULL
    source_table: str = ""
    target_table: str = ""


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
        if config.mode not in MODES:
            raise dg.Failure(
                f"supplier_stats config mode {config.mode!r} is not one of {', '.join(MODES)}: use full to recompute "
                "the whole day, incremental to add only the orders appended since its last write",
                allow_retries=False,
            )
        day = context.partition_key
        # the catalog names of the two tables: their identity's catalog symlink
        source_table = f"{CATALOG_NAME}.{config.source_table or source.table_name}"
        target_table = f"{CATALOG_NAME}.{config.target_table or target.table_name}"
        session = spark.spark_session
        app_id = session.sparkContext.applicationId
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
                done = write_day(session, iceberg.catalog(), source_table, target_table, day, config.mode)
                if done.day_rows is not None:  # committed (an overwrite that adds nothing may leave no snapshot)
                    added = summary_of(done.written)
                    statistics = RunStatistics(
                        (source.namespace, source.name),
                        (target.namespace, target.name),
                        input_rows=done.read.rows,
                        input_bytes=done.input_bytes,
                        output_rows=int(added.get("added-records", done.day_rows or 0)),
                        output_bytes=int(added.get("added-files-size", 0)) if done.written is not None else None,
                    )
            except dg.Failure as exc:
                error = exc
                raise
            except Exception as exc:
                error = exc
                first_line = (str(exc).strip().splitlines() or [""])[0]
                raise dg.Failure(
                    f"Spark job {target.producer} failed for {day}: {type(exc).__name__}: {first_line} "
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
        current = table.current_snapshot()
        snapshot = done.written.snapshot_id if done.written else (current.snapshot_id if current else None)
        location = table.location()
        if done.day_rows is None:
            context.log.info(f"{day}: {done.read.reason}; its rows stand and nothing was committed")
        return dg.MaterializeResult(
            metadata={
                "dagster/row_count": rows,
                "dagster/column_schema": table_schema(target),
                "dagster/column_lineage": column_lineage(pipeline, target),
                "rejected_orders": done.read.rejected,
                "input_orders": done.read.rows,
                "day_input_orders": done.day_orders,
                "supplier_stats/mode": done.read.mode,
                "supplier_stats/mode_reason": done.read.reason,
                "iceberg/input_snapshot_id": str(done.input_snapshot),
                "iceberg/start_snapshot_id": str(done.read.start),
                "iceberg/base_snapshot_id": str(done.read.base),
                "partition": day,
                "iceberg/snapshot_id": str(snapshot),
                "dagster/uri": location,
                "spark/application_id": app_id,
                "iceberg/committed": done.day_rows is not None,
                "marquez/job": f"{target.producer} (parent: run {spark.parent[0]} of job {spark.parent[1]})",
                "openlineage/events_queued": len(queued),
            }
        )

    return supplier_stats
