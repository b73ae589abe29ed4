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


def test_the_daemons_day_runs_of_supplier_stats_run_every_step_in_the_runs_own_process():
    """The sensor's and the finalise schedule's runs: the Spark step and its checks in one process, not one each."""
    from lineage_assets.definitions import build_definitions

    defs = build_definitions(StackSettings())

    for name in ("supplier_stats_days_job", "supplier_stats_finalise_job"):
        job = defs.resolve_job_def(name)
        assert job.executor_def.name == "in_process", name
        assert next(n.name for n in job.nodes_in_topological_order) == "iceberg__default__supplier_stats", name
