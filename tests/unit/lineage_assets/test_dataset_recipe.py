"""docs/extending.md, recipe 1 ("Add a dataset"), followed step by step with a throwaway dataset: a daily total per
supplier written by a Spark job from Iceberg supplier_stats. The dataset and its job exist only in this test (the
product's identity module is copied and extended in memory); the test then finds them where the recipe says they
appear: in the Dagster definitions (the asset, its dependency, its identity metadata, its six lineage checks) and in
the declared lineage (upstream edges, column edges, the drift report, the conservation hops). Every expected value
is written here by hand, for the default settings (the embedded stack on 127.0.0.1)."""

from __future__ import annotations

import dagster as dg
import pytest

from infra.settings import StackSettings
from lineage_assets.checks.asset_checks import (
    build_lineage_checks,
    build_streaming_checks_job,
    build_streaming_checks_schedule,
)
from lineage_assets.checks.conservation import checked_hops
from lineage_assets.checks.drift_report import expected_column_edges, verify
from lineage_assets.checks.graph import LineageGraph
from lineage_assets.conservation.hops import hops
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage import naming
from lineage_assets.lineage.identity import DAGSTER_JOB, Column, ColumnSource, Dataset, Job, Pipeline, Symlink
from lineage_assets.metadata import asset_key, identity_metadata

NEW_KEY = dg.AssetKey(["iceberg", "default", "supplier_daily"])
UPSTREAM_KEY = dg.AssetKey(["iceberg", "default", "supplier_stats"])
NEW_JOB = "dagster.supplier_daily"
LINEAGE_CHECKS = {
    "lineage_dataset_exists",
    "lineage_schema_matches",
    "lineage_upstream_matches",
    "lineage_run_state_agrees",
    "lineage_single_identity",
    "lineage_upstream_schema",
}


def with_supplier_daily(settings: StackSettings) -> Pipeline:
    """Steps 1 and 2: the dataset and its producer, declared as Pipeline.from_settings declares its own."""
    base = Pipeline.from_settings(settings)
    daily = Dataset(
        "iceberg_supplier_daily",
        *naming.iceberg_table(f"{settings.warehouse_uri}default/supplier_daily"),
        ("iceberg", "default", "supplier_daily"),
        (
            Column("supplier", "string"),
            Column("bid_date", "date"),
            Column("total_price", "decimal(10,2)"),
        ),
        producer=NEW_JOB,
        description="Per supplier and day: total price",
        symlinks=(Symlink(settings.iceberg_catalog_url, "default.supplier_daily"),),
    )
    job = Job(
        NEW_JOB,
        settings.openlineage_namespace,
        "BATCH",
        "SPARK",
        "JOB",
        ("iceberg_supplier_stats",),
        ("iceberg_supplier_daily",),
        {
            "iceberg_supplier_daily": {
                "supplier": (ColumnSource("iceberg_supplier_stats", "supplier"),),
                "bid_date": (ColumnSource("iceberg_supplier_stats", "bid_date"),),
                "total_price": (ColumnSource("iceberg_supplier_stats", "total_price", "DIRECT", "AGGREGATION"),),
            }
        },
        "PySpark: daily totals per supplier",
        parent=DAGSTER_JOB,
    )
    return Pipeline({**base.datasets, daily.key: daily}, {**base.jobs, job.name: job})


def build_supplier_daily_asset(pipeline: Pipeline) -> dg.AssetsDefinition:
    """Step 3: its asset, built from the identity module (the body would run the Spark job)."""
    target = pipeline.dataset("iceberg_supplier_daily")
    job = pipeline.job(target.producer)

    @dg.asset(
        key=asset_key(target),
        deps=[asset_key(pipeline.dataset(k)) for k in job.inputs],
        description=target.description,
        kinds={"spark", "iceberg"},
        group_name="batch",
        metadata=identity_metadata(pipeline, target),
    )
    def supplier_daily() -> None:
        raise NotImplementedError("a recipe test never materializes it")

    return supplier_daily


@pytest.fixture(scope="module")
def settings() -> StackSettings:
    return StackSettings()


@pytest.fixture(scope="module")
def pipeline(settings) -> Pipeline:
    return with_supplier_daily(settings)


@pytest.fixture(scope="module")
def defs(settings, pipeline) -> dg.Definitions:
    """Step 4: registered beside the product's assets, with the lineage checks built from the extended pipeline
    (step 6: they follow on their own)."""
    product = build_definitions(settings)
    return dg.Definitions(
        assets=[*product.assets, build_supplier_daily_asset(pipeline)],
        asset_checks=build_lineage_checks(pipeline),
        schedules=[
            build_streaming_checks_schedule(build_streaming_checks_job(pipeline), settings.checks_every_minutes)
        ],
        resources=product.resources,
    )


def test_dagster_shows_the_asset_with_its_dependency(defs):
    graph = defs.resolve_asset_graph()
    assert NEW_KEY in graph.get_all_asset_keys()
    assert graph.get(NEW_KEY).parent_keys == {UPSTREAM_KEY}
    assert NEW_KEY in graph.get(UPSTREAM_KEY).child_keys


def test_the_asset_carries_its_identity_and_column_lineage(defs):
    (spec,) = [s for s in defs.resolve_all_asset_specs() if s.key == NEW_KEY]
    meta = spec.metadata
    assert meta["openlineage/namespace"] == "s3://warehouse"
    assert meta["openlineage/name"] == "default/supplier_daily"
    assert meta["openlineage/producer_job"] == "dagster.supplier_daily"
    assert meta["marquez/node_id"] == "dataset:s3://warehouse:default/supplier_daily"
    assert [c.name for c in meta["dagster/column_schema"].columns] == ["supplier", "bid_date", "total_price"]
    deps = meta["dagster/column_lineage"].deps_by_column
    assert {col: [(d.asset_key, d.column_name) for d in ds] for col, ds in deps.items()} == {
        "supplier": [(UPSTREAM_KEY, "supplier")],
        "bid_date": [(UPSTREAM_KEY, "bid_date")],
        "total_price": [(UPSTREAM_KEY, "total_price")],
    }


def test_the_six_lineage_checks_cover_it(defs):
    graph = defs.resolve_asset_graph()
    checks = {key.name for key in graph.asset_check_keys if key.asset_key == NEW_KEY}
    assert checks == LINEAGE_CHECKS


def test_a_batch_dataset_stays_out_of_the_streaming_checks_and_the_deploy_step(defs, pipeline):
    job = defs.resolve_job_def("streaming_lineage_checks")
    checked = {key.asset_key for key in job.asset_layer.asset_graph.asset_check_keys}
    assert UPSTREAM_KEY not in checked and NEW_KEY not in checked
    assert dg.AssetKey(["iceberg", "default", "orders"]) in checked
    # what the main job's deploy_streaming deploys: the streaming side only, as before the new dataset
    assert set(pipeline.streaming_deployment()) == {
        "source_orders",
        "kafka_orders",
        "archive_orders",
        "iceberg_orders",
        "kafka_supplier_stats",
    }


def test_the_declared_lineage_has_its_edges(pipeline):
    assert pipeline.upstream("iceberg_supplier_daily") == ("iceberg_supplier_stats",)
    assert pipeline.by_identity("s3://warehouse", "default/supplier_daily").key == "iceberg_supplier_daily"
    assert pipeline.by_identity("http://127.0.0.1:8181", "default.supplier_daily").key == "iceberg_supplier_daily"
    stats = ("s3://warehouse", "default/supplier_stats")
    daily = ("s3://warehouse", "default/supplier_daily")
    new_edges = {edge for edge in expected_column_edges(pipeline) if edge[2] == daily}
    assert new_edges == {
        (stats, "supplier", daily, "supplier"),
        (stats, "bid_date", daily, "bid_date"),
        (stats, "total_price", daily, "total_price"),
    }


def test_the_drift_report_expects_it_in_marquez(pipeline):
    report = verify(pipeline, LineageGraph())
    assert "job lineage-lab/dagster.supplier_daily is not in the lineage graph" in report.drift
    assert (
        "missing column edge s3://warehouse/default/supplier_stats.total_price -> "
        "s3://warehouse/default/supplier_daily.total_price"
    ) in report.drift


def test_its_job_without_a_kind_is_neither_a_hop_nor_checked(pipeline):
    assert pipeline.job(NEW_JOB).kind is None
    assert NEW_JOB not in hops(pipeline)
    assert NEW_JOB not in {h.job.name for h in checked_hops(pipeline)}
