"""How fresh each output must be, in Dagster's freshness model (evaluated by the daemon `dagster dev` runs).

The streaming outputs count as fresh while new data keeps arriving: their sensors record a materialization when
it does (a new Iceberg snapshot, new records in the output topic, new archive objects), so a stopped Flink job or
connector turns its output late within the window. The daily supplier_stats must be finalised early each day.
"""

import datetime as dt

import dagster as dg

from infra.settings import StackSettings

#: yesterday's supplier_stats partition is finalised at this time (UTC) by the schedule in spark/schedules.py
FINALISE_AT = (0, 30)


def streaming_output(settings: StackSettings) -> dg.FreshnessPolicy:
    """Late when no new data arrived for LINEAGE_LAB_STREAMING_FRESH_MINUTES (warned at half of it)."""
    window = dt.timedelta(minutes=settings.streaming_fresh_minutes)
    return dg.FreshnessPolicy.time_window(fail_window=window, warn_window=window / 2)


def daily_batch() -> dg.FreshnessPolicy:
    """Materialized between midnight and 02:00 UTC every day (the finalising run starts at 00:30)."""
    return dg.FreshnessPolicy.cron(deadline_cron="0 2 * * *", lower_bound_delta=dt.timedelta(hours=2), timezone="UTC")
