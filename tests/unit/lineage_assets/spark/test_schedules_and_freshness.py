"""Dagster runs the batch side on its own and says when the streaming side falls behind: yesterday's partition is
finalised after the day closes, and every output declares how fresh it must be."""

import datetime as dt

import dagster as dg
import yaml

from infra.services.dagster import instance_config
from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.freshness import caught_up_materialization_due
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.spark.supplier_stats_batch import SPARK_POOL
from lineage_assets.tunables import PipelineTunables

defs = build_definitions(StackSettings())
pipeline = Pipeline.from_settings(StackSettings())


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


def test_a_caught_up_job_refreshes_its_output_every_quarter_window():
    fresh_minutes = PipelineTunables.from_settings(StackSettings(streaming_fresh_minutes=10)).streaming_fresh_minutes
    assert caught_up_materialization_due(None, 1_000.0, fresh_minutes), "an output never materialized"
    assert not caught_up_materialization_due(1_000.0, 1_000.0 + 149, fresh_minutes)
    assert caught_up_materialization_due(1_000.0, 1_000.0 + 150, fresh_minutes), "a quarter window: before the warning"


def test_every_sensor_and_schedule_runs_on_its_own_by_default():
    repository = defs.get_repository_def()
    sensors = {s.name: s.default_status for s in repository.sensor_defs}
    schedules = {s.name: s.default_status for s in repository.schedule_defs}
    assert set(sensors) >= {
        "connector_sensor",
        "flink_job_sensor",
        "supplier_stats_new_orders_sensor",
        "dead_letter_sensor",
    }
    assert set(sensors.values()) == {dg.DefaultSensorStatus.RUNNING}, sensors
    assert set(schedules.values()) == {dg.DefaultScheduleStatus.RUNNING}, schedules


def test_spark_runs_share_a_pool_that_the_stack_limits_to_one_run():
    node = defs.resolve_asset_graph().get(asset_key(pipeline.dataset("iceberg_supplier_stats")))
    assert node.pools == {SPARK_POOL}
    config = yaml.safe_load(instance_config(3))
    assert config["concurrency"]["runs"]["max_concurrent_runs"] == 3
    assert config["concurrency"]["pools"] == {"granularity": "run", "default_limit": 1}
    assert config["telemetry"]["enabled"] is False
