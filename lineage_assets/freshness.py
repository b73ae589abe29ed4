"""How fresh each output must be, in Dagster's freshness model (evaluated by the daemon `dagster dev` runs).

The streaming outputs count as fresh while their job keeps them current: their sensors record a materialization
when new data arrives (a new Iceberg snapshot, new records in the output topic, new archive objects), and, when no
input came, once every quarter window while the job runs and has consumed all its input (its output is then as
current as it can be). A stopped, failed or lagging Flink job or connector therefore turns its output late within
the window, and a quiet topic does not. The daily supplier_stats must be finalised early each day.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import dagster as dg

from infra.settings import StackSettings

#: yesterday's supplier_stats partition is finalised at this time (UTC) by the schedule in spark/schedules.py
FINALISE_AT = (0, 30)


@dataclass(frozen=True)
class PipelineTunables:
    """The pipeline's thresholds that are neither endpoints nor secrets, as the asset, sensor and check factories
    take them (``build_definitions`` reads them from the settings; each LINEAGE_LAB_<FIELD> in upper case)."""

    #: a streaming output is late when no new data arrived for this long (warned at half of it)
    streaming_fresh_minutes: int = StackSettings.streaming_fresh_minutes
    #: the conservation check warns when the oldest pending record waits longer
    conservation_pending_warn_s: int = StackSettings.conservation_pending_warn_s
    #: the dead_letter_share check fails when a dead-letter topic gets a larger share of the new records
    dead_letter_max_share: float = StackSettings.dead_letter_max_share
    #: the valid-order rule of both Flink jobs: how far in the future and in the past an order's bid_time may be
    order_max_future_s: int = StackSettings.order_max_future_s
    order_max_past_s: int = StackSettings.order_max_past_s
    #: seconds between two check runs a monitoring sensor asks for
    check_run_interval_s: int = StackSettings.check_run_interval_s
    #: minutes between two scheduled runs of every streaming asset's checks
    checks_every_minutes: int = StackSettings.checks_every_minutes
    #: seconds between two ticks of each sensor
    sensor_interval_s: int = StackSettings.sensor_interval_s
    #: seconds a supplier_stats day may lag its newest orders while they flow (the new-orders sensor's budget)
    supplier_stats_freshness_s: int = StackSettings.supplier_stats_freshness_s

    @classmethod
    def from_settings(cls, settings: StackSettings) -> PipelineTunables:
        return cls(
            streaming_fresh_minutes=settings.streaming_fresh_minutes,
            conservation_pending_warn_s=settings.conservation_pending_warn_s,
            dead_letter_max_share=settings.dead_letter_max_share,
            order_max_future_s=settings.order_max_future_s,
            order_max_past_s=settings.order_max_past_s,
            check_run_interval_s=settings.check_run_interval_s,
            checks_every_minutes=settings.checks_every_minutes,
            sensor_interval_s=settings.sensor_interval_s,
            supplier_stats_freshness_s=settings.supplier_stats_freshness_s,
        )


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
