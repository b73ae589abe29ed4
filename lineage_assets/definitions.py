"""The lineage_assets code location: every asset, job and sensor of the pipeline, wired to the stack's resources.

``build_definitions(settings)`` builds them all from the settings it is given; the module-level ``defs`` (the
environment's settings) exists only for Dagster's loaders (workspace.yaml, ``dg``, ``dagster dev``): code and tests
call ``build_definitions`` instead."""

from __future__ import annotations

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.checks.asset_checks import (
    STREAMING_CHECKS_JOB,
    build_lineage_checks,
    build_streaming_checks_job,
    build_streaming_checks_schedule,
    streaming_assets,
)
from lineage_assets.checks.conservation import build_conservation_checks
from lineage_assets.checks.drift_report import picture_path
from lineage_assets.checks.engine_lineage import build_engine_lineage_check
from lineage_assets.checks.verify_job import build_verify_job
from lineage_assets.connect.assets import build_connect_assets
from lineage_assets.connect.sensor import build_connector_sensor
from lineage_assets.conservation.stores import count_store_path
from lineage_assets.flink.iceberg_ingestion_asset import build_iceberg_ingestion_asset
from lineage_assets.flink.runs_once import build_runs_once_checks
from lineage_assets.flink.sensor import build_flink_job_sensor
from lineage_assets.flink.supplier_stats_stream_asset import build_supplier_stats_stream_asset
from lineage_assets.flink.version_drift import build_version_drift_checks
from lineage_assets.jobs import build_main_jobs
from lineage_assets.kafka.dead_letter_monitor import build_dead_letter_sensor, build_dead_letter_share_check
from lineage_assets.kafka.dead_letter_topics import build_dead_letter_specs
from lineage_assets.latest_checks import LatestChecks
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources
from lineage_assets.source.generator import generate_orders_job
from lineage_assets.spark.new_orders_sensor import build_supplier_stats_partition_sensor
from lineage_assets.spark.schedules import build_finalise_yesterday_schedule
from lineage_assets.spark.supplier_stats_batch import build_supplier_stats_asset
from lineage_assets.tunables import PipelineTunables


def build_definitions(settings: StackSettings) -> dg.Definitions:
    """Every asset, check, job, schedule and sensor of the pipeline, and the resources, for these settings: the
    factories get the identity, the tunables and local paths; endpoints and secrets reach them only through the
    resources."""
    pipeline = Pipeline.from_settings(settings)
    tunables = PipelineTunables.from_settings(settings)
    count_store = count_store_path(settings)
    fresh_minutes, interval_s = tunables.streaming_fresh_minutes, tunables.sensor_interval_s
    asset_checks = [
        *build_lineage_checks(pipeline),
        *build_engine_lineage_check(pipeline),
        build_dead_letter_share_check(pipeline, tunables.dead_letter_max_share),
        *build_version_drift_checks(pipeline),
        *build_runs_once_checks(pipeline),
        *build_conservation_checks(pipeline, tunables.conservation_pending_warn_s, count_store),
    ]
    streaming_checks = build_streaming_checks_job(pipeline)
    # the sensors ask for runs of the checks of what they materialize (their ticks only observe)
    latest_checks = LatestChecks.of(
        STREAMING_CHECKS_JOB, asset_checks, streaming_assets(pipeline), tunables.check_run_interval_s
    )
    return dg.Definitions(
        assets=[
            *build_connect_assets(pipeline, tunables),
            build_supplier_stats_stream_asset(pipeline, tunables),
            build_iceberg_ingestion_asset(pipeline, tunables),
            build_supplier_stats_asset(pipeline),
            *build_dead_letter_specs(pipeline),
        ],
        asset_checks=asset_checks,
        jobs=[
            generate_orders_job,
            build_verify_job(pipeline, picture_path(settings)),
            *build_main_jobs(pipeline),
            streaming_checks,
        ],
        schedules=[
            build_streaming_checks_schedule(streaming_checks, tunables.checks_every_minutes),
            build_finalise_yesterday_schedule(pipeline),
        ],
        sensors=[
            build_connector_sensor(
                pipeline, fresh_minutes=fresh_minutes, latest_checks=latest_checks, interval_s=interval_s
            ),
            build_flink_job_sensor(pipeline, fresh_minutes, latest_checks=latest_checks, interval_s=interval_s),
            build_supplier_stats_partition_sensor(
                pipeline, freshness_s=tunables.supplier_stats_freshness_s, interval_s=interval_s
            ),
            build_dead_letter_sensor(pipeline, interval_s=interval_s),
        ],
        resources=build_resources(settings),
    )


#: for Dagster's loaders only (workspace.yaml, dg, dagster dev): the environment's settings, read at import
defs = build_definitions(StackSettings.from_env())
