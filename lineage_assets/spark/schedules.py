"""Yesterday's supplier_stats, finalised once the day has closed: late orders of that day (those Flink committed
after the last run of the day) are counted too. The UI's backfill covers any range of days."""

import datetime as dt

import dagster as dg

from lineage_assets.freshness import FINALISE_AT
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.spark.partitions import DAY_RUN_EXECUTOR


def build_finalise_yesterday_schedule(pipeline: Pipeline) -> dg.ScheduleDefinition:
    target = asset_key(pipeline.dataset("iceberg_supplier_stats"))
    job = dg.define_asset_job("supplier_stats_finalise_job", selection=[target], executor_def=DAY_RUN_EXECUTOR)
    hour, minute = FINALISE_AT

    @dg.schedule(
        name="supplier_stats_finalise_yesterday",
        job=job,
        cron_schedule=f"{minute} {hour} * * *",
        execution_timezone="UTC",
        description=f"Every day at {hour:02d}:{minute:02d} UTC: recompute yesterday's {target.to_user_string()}",
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    def supplier_stats_finalise_yesterday(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        yesterday = (context.scheduled_execution_time.astimezone(dt.UTC) - dt.timedelta(days=1)).date().isoformat()
        return dg.RunRequest(run_key=f"finalise:{yesterday}", partition_key=yesterday)

    return supplier_stats_finalise_yesterday
