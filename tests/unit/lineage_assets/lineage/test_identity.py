import dataclasses

import pytest

from infra.settings import StackSettings
from lineage_assets.lineage import naming
from lineage_assets.lineage.identity import CONSUMER_GROUPS, Column, Pipeline


@pytest.fixture
def pipeline() -> Pipeline:
    return Pipeline.from_settings(StackSettings())


def test_the_reference_data_flow(pipeline):
    edges = {(i, j.name, o) for j in pipeline.jobs.values() for i in j.inputs for o in j.outputs}
    assert edges == {
        ("source_orders", "orders-source", "kafka_orders"),
        ("kafka_orders", "orders-s3-sink", "archive_orders"),
        ("kafka_orders", "supplier-stats", "kafka_supplier_stats"),
        ("kafka_orders", "iceberg-ingestion", "iceberg_orders"),
        ("iceberg_orders", "dagster.supplier_stats", "iceberg_supplier_stats"),
        # where each streaming job puts what it cannot process
        ("kafka_orders", "orders-s3-sink", "dlq_orders_s3_sink"),
        ("kafka_orders", "supplier-stats", "dlq_supplier_stats"),
        ("kafka_orders", "iceberg-ingestion", "dlq_iceberg_ingestion"),
    }
    for ds in pipeline.datasets.values():
        if ds.key != "source_orders":
            assert ds.key in pipeline.job(ds.producer).outputs, f"{ds.key}'s producer does not write it"


def test_every_identity_is_unique(pipeline):
    identities = [(d.namespace, d.name) for d in pipeline.datasets.values()]
    assert len(set(identities)) == len(identities)
    assert len({d.asset_key for d in pipeline.datasets.values()}) == len(pipeline.datasets)
    assert len({d.node_id for d in pipeline.datasets.values()}) == len(pipeline.datasets)


def test_identities_follow_the_settings_not_literals():
    moved = dataclasses.replace(StackSettings(), host="10.1.2.3", kafka_port=19092, warehouse_bucket="lake")
    p = Pipeline.from_settings(moved)
    assert p.dataset("kafka_orders").namespace == "kafka://10.1.2.3:19092"
    assert p.dataset("iceberg_orders").namespace == "s3://lake"
    assert p.dataset("iceberg_orders").symlinks[0].namespace == "http://10.1.2.3:8181"


def test_any_producer_spelling_resolves_to_the_same_dataset(pipeline):
    orders = pipeline.dataset("kafka_orders")
    for bootstrap in ("127.0.0.1:9092", "127.0.0.1:9092,127.0.0.1:9093", "PLAINTEXT://127.0.0.1:9092"):
        assert pipeline.by_identity(*naming.kafka(bootstrap, "orders")) is orders
    table = pipeline.dataset("iceberg_orders")
    assert pipeline.by_identity(*naming.iceberg_table("s3a://warehouse/default/orders/")) is table
    assert pipeline.by_identity("http://127.0.0.1:8181", "default.orders") is table, "catalog symlink"
    assert pipeline.by_identity("kafka://localhost:9092", "orders") is None, "localhost is another namespace"


def test_marquez_node_ids(pipeline):
    assert pipeline.dataset("kafka_orders").node_id == "dataset:kafka://127.0.0.1:9092:orders"
    assert pipeline.dataset("iceberg_orders").node_id == "dataset:s3://warehouse:default/orders"
    assert pipeline.job("iceberg-ingestion").node_id == "job:lineage-lab:iceberg-ingestion"


def test_column_lineage_names_real_columns(pipeline):
    for job in pipeline.jobs.values():
        for out_key, columns in job.column_lineage.items():
            assert out_key in job.outputs
            out = pipeline.dataset(out_key)
            assert set(columns) == set(out.column_names), f"{job.name}: every output column has lineage"
            for sources in columns.values():
                for src in sources:
                    assert src.dataset in job.inputs
                    pipeline.dataset(src.dataset).column(src.column)


def test_upstream_edges_and_asset_keys(pipeline):
    assert pipeline.upstream("iceberg_supplier_stats") == ("iceberg_orders",)
    assert pipeline.upstream("source_orders") == ()
    assert pipeline.by_asset_key(["iceberg", "default", "orders"]).key == "iceberg_orders"


def test_a_job_with_a_parent_is_named_under_it_so_marquez_keeps_its_name(pipeline):
    """Marquez files a job whose events carry a parent facet as <parent>.<name> unless the name starts so."""
    from lineage_assets.lineage.identity import DAGSTER_JOB, Job
    from lineage_assets.lineage.naming import NamingError

    spark = pipeline.job(pipeline.dataset("iceberg_supplier_stats").producer)
    assert spark.parent == DAGSTER_JOB and spark.name.startswith(DAGSTER_JOB + ".")
    assert pipeline.job(DAGSTER_JOB).inputs == () and pipeline.job(DAGSTER_JOB).outputs == ()
    streaming = [j for j in pipeline.jobs.values() if j.processing_type == "STREAMING"]
    assert streaming and all(j.parent is None for j in streaming), "streaming jobs outlive their Dagster run"
    with pytest.raises(NamingError, match=r"dagster\.spark_app"):
        Job("spark_app", "ns", "BATCH", "SPARK", "JOB", (), (), parent="dagster")


def test_optional_columns_are_reported_only_once_the_topic_has_them(pipeline):
    before = pipeline.observed_columns(None)
    assert set(before) == {"source_orders", "kafka_orders", "archive_orders"}, "only datasets with optional columns"
    for key, columns in before.items():
        assert "currency" not in [c.name for c in columns], key
        assert [c.name for c in columns] == [c.name for c in pipeline.dataset(key).columns if not c.optional]

    registered = (*(c for c in pipeline.dataset("kafka_orders").columns), Column("coupon", "string"))
    after = pipeline.observed_columns(registered)
    assert after["kafka_orders"] == registered, "the topic is described as registered, undeclared fields too"
    assert "currency" in [c.name for c in after["source_orders"]]
    assert "coupon" not in [c.name for c in after["archive_orders"]], "declared columns only"
    assert "currency" in [c.name for c in pipeline.dataset("iceberg_orders").columns], "the table carries it"


def test_namespaces_follow_external_endpoints():
    from infra.settings import StackSettings
    from lineage_assets.lineage.identity import Pipeline

    s = StackSettings.from_env(
        {
            "LINEAGE_LAB_EXTERNAL_KAFKA": "broker-1.prod:9093,broker-2.prod:9093",
            "LINEAGE_LAB_EXTERNAL_ICEBERG_CATALOG": "https://catalog.prod:8443/",
            "LINEAGE_LAB_WAREHOUSE_BUCKET": "lake",
        }
    )
    p = Pipeline.from_settings(s)
    assert p.dataset("kafka_orders").namespace == "kafka://broker-1.prod:9093"
    assert p.dataset("kafka_supplier_stats").namespace == "kafka://broker-1.prod:9093"
    assert p.dataset("iceberg_orders").namespace == "s3://lake"
    assert p.dataset("iceberg_orders").symlinks[0].namespace == "https://catalog.prod:8443"


# --- exact values (issue 28: each pins a mutant of the naming rules; see docs/mutation.md) ------------------------
@pytest.mark.parametrize("name", ["a:b", "1orders", "1a"])
def test_a_name_marquez_cannot_put_in_a_node_id_is_refused(pipeline, name):
    ds = pipeline.dataset("kafka_orders")
    with pytest.raises(naming.NamingError) as err:
        dataclasses.replace(ds, name=name)
    assert str(err.value) == f"dataset name {name!r} cannot be part of a Marquez node id"


@pytest.mark.parametrize("name", ["orders", "o1", "XX"])
def test_a_name_with_a_later_digit_and_no_colon_is_fine(pipeline, name):
    assert dataclasses.replace(pipeline.dataset("kafka_orders"), name=name).name == name


def test_the_topics_keep_a_week_and_the_dead_letters_four():
    from lineage_assets.connect import assets as connect_assets
    from lineage_assets.flink import iceberg_ingestion_asset, supplier_stats_stream_asset

    assert connect_assets.ORDERS_TOPIC.retention_ms == 604_800_000  # 7 * 86,400,000
    dead_letter_topics = (
        connect_assets.DLQ_TOPIC,
        iceberg_ingestion_asset.DLQ_TOPIC,
        supplier_stats_stream_asset.DLQ_TOPIC,
    )
    assert [t.retention_ms for t in dead_letter_topics] == [2_419_200_000] * 3  # 28 days


def test_the_flink_jobs_and_what_each_produces(pipeline):
    assert [j.name for j in pipeline.flink_jobs()] == ["iceberg-ingestion", "supplier-stats"]
    outputs = {name: pipeline.output(name).key for name in ("orders-source", "orders-s3-sink", *CONSUMER_GROUPS)}
    assert outputs == {
        "orders-source": "kafka_orders",
        "orders-s3-sink": "archive_orders",
        "iceberg-ingestion": "iceberg_orders",
        "supplier-stats": "kafka_supplier_stats",
    }
    assert CONSUMER_GROUPS == {"iceberg-ingestion": "iceberg-ingestion", "supplier-stats": "supplier-stats"}


def test_the_streaming_deployment_is_every_streaming_output_and_the_source_table(pipeline):
    assert pipeline.streaming_deployment() == (
        "source_orders",
        "kafka_orders",
        "archive_orders",
        "kafka_supplier_stats",
        "iceberg_orders",
    )


def test_an_iceberg_table_is_loaded_by_its_catalog_name_and_only_a_table_has_one(pipeline):
    assert pipeline.dataset("iceberg_orders").table_name == "default.orders"
    assert pipeline.dataset("iceberg_supplier_stats").table_name == "default.supplier_stats"
    with pytest.raises(ValueError, match="'kafka_orders' is a kafka_topic, not an Iceberg table"):
        _ = pipeline.dataset("kafka_orders").table_name
