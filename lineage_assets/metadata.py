"""Dagster's view of the identity module: asset keys, column schemas, column lineage and the identity metadata
every asset carries (so checks and people can see which OpenLineage dataset and Marquez node it is)."""

from __future__ import annotations

import dagster as dg

from lineage_assets.lineage.identity import Dataset, Pipeline


def asset_key(ds: Dataset) -> dg.AssetKey:
    return dg.AssetKey(list(ds.asset_key))


def table_schema(ds: Dataset) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[dg.TableColumn(name=c.name, type=c.type, description=c.description or None) for c in ds.columns]
    )


def column_lineage(pipeline: Pipeline, ds: Dataset) -> dg.TableColumnLineage | None:
    job = pipeline.jobs.get(ds.producer)
    columns = job.column_lineage.get(ds.key) if job else None
    if not columns:
        return None
    return dg.TableColumnLineage(
        deps_by_column={
            column: [
                dg.TableColumnDep(asset_key=asset_key(pipeline.dataset(src.dataset)), column_name=src.column)
                for src in sources
            ]
            for column, sources in columns.items()
        }
    )


def identity_metadata(pipeline: Pipeline, ds: Dataset) -> dict[str, object]:
    """Definition metadata of a dataset's asset."""
    meta: dict[str, object] = {
        "dagster/column_schema": table_schema(ds),
        "dagster/table_name": ds.name,
        "dagster/uri": f"{ds.namespace}/{ds.name}",
        "openlineage/namespace": ds.namespace,
        "openlineage/name": ds.name,
        "openlineage/producer_job": ds.producer,
        "marquez/node_id": ds.node_id,
    }
    lineage = column_lineage(pipeline, ds)
    if lineage:
        meta["dagster/column_lineage"] = lineage
    return meta
