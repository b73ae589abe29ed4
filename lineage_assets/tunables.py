"""The pipeline's thresholds that are neither endpoints nor secrets (freshness window, conservation pending warning,
dead-letter share, the valid-order rule, sensor and check intervals), as the asset, sensor and check factories take
them: plain values, so a factory never needs ``StackSettings``."""

from __future__ import annotations

from dataclasses import dataclass

from infra.settings import StackSettings


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
