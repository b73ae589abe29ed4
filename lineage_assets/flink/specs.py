"""Asset specs of Flink outputs whose job is not deployed from Dagster yet (supplier-stats), so checks and people
see them with their identity."""

import dagster as dg

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key, identity_metadata


def build_flink_output_specs(pipeline: Pipeline) -> list[dg.AssetSpec]:
    specs = []
    for key, kinds in (("kafka_supplier_stats", {"kafka", "flink"}),):
        ds = pipeline.dataset(key)
        job = pipeline.job(ds.producer)
        specs.append(
            dg.AssetSpec(
                key=asset_key(ds),
                deps=[asset_key(pipeline.dataset(k)) for k in job.inputs],
                description=f"{ds.description} (written by the Flink job {job.name})",
                kinds=kinds,
                owners=["team:data-platform"],
                group_name="streaming",
                metadata=identity_metadata(pipeline, ds),
            )
        )
    return specs
