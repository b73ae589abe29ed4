"""Asset specs of the Flink jobs' outputs, so downstream assets (supplier_stats) and checks can depend on them.
They become materializable when the Flink jobs are deployed from Dagster."""

import dagster as dg

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key, identity_metadata


def build_flink_output_specs(pipeline: Pipeline) -> list[dg.AssetSpec]:
    specs = []
    for key, kinds in (("kafka_supplier_stats", {"kafka", "flink"}), ("iceberg_orders", {"iceberg", "flink"})):
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
