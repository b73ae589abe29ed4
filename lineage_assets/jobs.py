"""The named Dagster jobs the main job runs (``lineage-lab pipeline run``), also launchable from the UI: deploying
the streaming side, and every asset check. Named jobs, not ad-hoc selections, so that a deployment with a run
launcher (the Compose deployment's DockerRunLauncher) can be asked to run them by name."""

from __future__ import annotations

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key

#: what the main job deploys (identity-module dataset keys): everything but the batch table, which it then fills.
#: Derived from the identity module (its keys are the same whatever the settings), so a new streaming job is in it.
STREAMING = Pipeline.from_settings(StackSettings()).streaming_deployment()
DEPLOY_JOB = "deploy_streaming"
CHECKS_JOB = "run_asset_checks"


def build_main_jobs(pipeline: Pipeline) -> list[dg.UnresolvedAssetJobDefinition]:
    return [
        dg.define_asset_job(
            DEPLOY_JOB,
            selection=dg.AssetSelection.assets(
                *[asset_key(pipeline.dataset(k)) for k in pipeline.streaming_deployment()]
            ).without_checks(),
            description="Deploy the source table, the orders topic and CDC connector, the archive sink and both "
            "Flink jobs (the first step of the main job).",
            tags={"lineage-lab/step": "deploy"},
        ),
        dg.define_asset_job(
            CHECKS_JOB,
            selection=dg.AssetSelection.all_asset_checks(),
            description="Every asset check, against what Marquez, Kafka, Flink and Iceberg hold now.",
            tags={"lineage-lab/step": "asset checks"},
        ),
    ]
