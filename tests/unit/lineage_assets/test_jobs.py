import dagster as dg

from infra.settings import StackSettings
from lineage_assets.jobs import DEPLOY_JOB, STREAMING, build_main_jobs
from lineage_assets.lineage.identity import Pipeline


def test_the_main_job_deploys_the_streaming_side_but_not_the_batch_table():
    from lineage_assets.definitions import build_definitions

    defs = build_definitions(StackSettings())

    assert set(STREAMING) == {
        "source_orders",
        "kafka_orders",
        "archive_orders",
        "iceberg_orders",
        "kafka_supplier_stats",
    }
    (deploy,) = [j for j in build_main_jobs(Pipeline.from_settings(StackSettings())) if j.name == DEPLOY_JOB]
    assert deploy.selection.resolve(defs.resolve_asset_graph()) == {
        dg.AssetKey(["postgres", "orders_source", "orders"]),
        dg.AssetKey(["kafka", "orders"]),
        dg.AssetKey(["s3", "orders_archive"]),
        dg.AssetKey(["kafka", "supplier_stats"]),
        dg.AssetKey(["iceberg", "default", "orders"]),
    }
