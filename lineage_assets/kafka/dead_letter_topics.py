"""The dead-letter topics as assets: where each job puts the records it could not process, with the reason. They
are outputs of their jobs in the lineage graph, so Dagster shows them (and checks them) too; the topics themselves
are created by the asset of the job that writes them."""

import dagster as dg

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key, identity_metadata


def build_dead_letter_specs(pipeline: Pipeline) -> list[dg.AssetSpec]:
    specs = []
    for job_name in pipeline.dead_letter_jobs():
        job = pipeline.job(job_name)
        ds = pipeline.dead_letter_dataset(job_name)
        specs.append(
            dg.AssetSpec(
                key=asset_key(ds),
                deps=[asset_key(pipeline.dataset(k)) for k in job.inputs],
                description=f"{ds.description} (topic `{ds.name}`, written by `{job.name}`)",
                kinds={"kafka"},
                owners=["team:data-platform"],
                group_name="dead_letters",
                metadata=identity_metadata(pipeline, ds),
            )
        )
    return specs
