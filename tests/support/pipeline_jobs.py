"""The pipeline's two Flink jobs deployed the way the stack deploys them: through the deploy assets (iceberg/default/
orders, kafka/supplier_stats) built for a cluster's settings. A job that does not run starts from ``restore_from``
when given, else from its newest savepoint or retained checkpoint (the assets' own rule), so nothing is read twice.

Service modules that need the jobs running ask for them here rather than relying on the module before them: an
earlier module may have cancelled them on purpose (test_flink_pipeline, test_iceberg_ingestion, ...)."""

from __future__ import annotations

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.flink import iceberg_ingestion_asset, supplier_stats_stream_asset
from lineage_assets.flink.client import FlinkClient
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.tunables import PipelineTunables

JOBS = (iceberg_ingestion_asset.JOB, supplier_stats_stream_asset.JOB)
#: each job's deploy asset's op (its name in run config)
OPS = {
    iceberg_ingestion_asset.JOB: "iceberg__default__orders",
    supplier_stats_stream_asset.JOB: "kafka__supplier_stats",
}


def deploy(
    settings: StackSettings, resources: dict, instance: dg.DagsterInstance, restore: dict[str, str], step: str
) -> dict[str, dict]:
    """Materialize both deploy assets built for ``settings`` (the cluster they target), each job started from its
    savepoint in ``restore`` when it does not run there; a running job is adopted. Job name -> the
    materialization's metadata. ``step`` tags the run, so its origin shows in the Dagster UI."""
    pipeline, tunables = Pipeline.from_settings(settings), PipelineTunables.from_settings(settings)
    assets = [
        iceberg_ingestion_asset.build_iceberg_ingestion_asset(pipeline, tunables),
        supplier_stats_stream_asset.build_supplier_stats_stream_asset(pipeline, tunables),
    ]
    config = {OPS[name]: {"config": {"restore_from": restore.get(name, "")}} for name in JOBS}
    result = dg.materialize(
        assets,
        resources=resources,
        instance=instance,
        run_config={"ops": config},
        tags={"lineage-lab/step": step},
    )
    return {name: result.asset_materializations_for_node(OPS[name])[0].metadata for name in JOBS}


def job_ids(deployed: dict[str, dict]) -> dict[str, str]:
    return {name: meta["flink_job_id"].value for name, meta in deployed.items()}


def missing(settings: StackSettings) -> list[str]:
    """The pipeline jobs with no active Flink job on ``settings``' cluster, read from Flink's REST API."""
    client = FlinkClient(settings)
    return [name for name in JOBS if client.active(name) is None]
