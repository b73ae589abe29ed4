"""How fresh each output must be, in Dagster's freshness model (evaluated by the daemon `dagster dev` runs).

The streaming outputs count as fresh while their job keeps them current: their sensors record a materialization
when new data arrives (a new Iceberg snapshot, new records in the output topic, new archive objects), and, when no
input came, once every quarter window while the job runs and has consumed all its input (its output is then as
current as it can be). A stopped, failed or lagging Flink job or connector therefore turns its output late within
the window, and a quiet topic does not. The daily supplier_stats must be finalised early each day.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg

#: yesterday's supplier_stats partition is finalised at this time (UTC) by the schedule in spark/schedules.py
FINALISE_AT = (0, 30)


def streaming_output(fresh_minutes: int) -> dg.FreshnessPolicy:
    """Late when no new data arrived for ``fresh_minutes`` (LINEAGE_LAB_STREAMING_FRESH_MINUTES; warned at half)."""
    window = dt.timedelta(minutes=fresh_minutes)
    return dg.FreshnessPolicy.time_window(fail_window=window, warn_window=window / 2)


def daily_batch() -> dg.FreshnessPolicy:
    """Materialized between midnight and 02:00 UTC every day (the finalising run starts at 00:30)."""
    return dg.FreshnessPolicy.cron(deadline_cron="0 2 * * *", lower_bound_delta=dt.timedelta(hours=2), timezone="UTC")


def caught_up_materialization_due(last_materialized: float | None, now: float, fresh_minutes: int) -> bool:
    """Whether a running job that has consumed all its input should record a materialization now: when its output
    has none yet or its last one is a quarter of the freshness window (``fresh_minutes``) old. That is well before
    the warning at half the window, even with a sensor tick late, so a quiet input never makes the output warn or
    late."""
    quarter_window = fresh_minutes * 60 / 4
    return last_materialized is None or now - last_materialized >= quarter_window


#: metadata key saying why a streaming output was materialized
REASON = "freshness/reason"
NEW_DATA = "new data in the output"
CAUGHT_UP = "no new data: job running and caught up with its input"
