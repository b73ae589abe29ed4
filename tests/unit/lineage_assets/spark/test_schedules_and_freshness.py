"""Dagster runs the batch side on its own and says when the streaming side falls behind: yesterday's partition is
finalised after the day closes, and every output declares how fresh it must be."""

import datetime as dt

import dagster as dg

from lineage_assets.definitions import defs, pipeline
from lineage_assets.metadata import asset_key


def test_the_finalising_schedule_asks_for_yesterday():
    schedule = defs.get_repository_def().get_schedule_def("supplier_stats_finalise_yesterday")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    tick = dt.datetime(2026, 3, 1, 0, 30, tzinfo=dt.UTC)
    repository = defs.get_repository_def()
    with dg.build_schedule_context(scheduled_execution_time=tick, repository_def=repository) as context:
        (request,) = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-02-28"


def test_streaming_outputs_and_the_daily_table_declare_freshness():
    graph = defs.resolve_asset_graph()
    for key in ("iceberg_orders", "kafka_supplier_stats", "archive_orders"):
        policy = graph.get(asset_key(pipeline.dataset(key))).freshness_policy
        assert isinstance(policy, dg.FreshnessPolicy), key
        assert policy.fail_window.to_timedelta() >= dt.timedelta(minutes=1)
    daily = graph.get(asset_key(pipeline.dataset("iceberg_supplier_stats"))).freshness_policy
    assert daily.deadline_cron == "0 2 * * *"
