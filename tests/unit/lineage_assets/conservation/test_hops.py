"""The hops are the identity module's jobs with one input: written out by hand here."""

from infra.settings import StackSettings
from lineage_assets.conservation.hops import hops
from lineage_assets.lineage.identity import Pipeline


def test_each_job_with_one_input_is_a_hop_with_its_dead_letters_apart():
    found = hops(Pipeline.from_settings(StackSettings()))
    assert {
        name: (h.input.key, [o.key for o in h.outputs], h.dead_letters and h.dead_letters.key)
        for name, h in found.items()
    } == {
        "orders-source": ("source_orders", ["kafka_orders"], None),
        "orders-s3-sink": ("kafka_orders", ["archive_orders"], "dlq_orders_s3_sink"),
        "supplier-stats": ("kafka_orders", ["kafka_supplier_stats"], "dlq_supplier_stats"),
        "iceberg-ingestion": ("kafka_orders", ["iceberg_orders"], "dlq_iceberg_ingestion"),
        "dagster.supplier_stats": ("iceberg_orders", ["iceberg_supplier_stats"], None),
    }
    assert found["iceberg-ingestion"].output_names == (
        "s3://warehouse/default/orders",
        "kafka://127.0.0.1:9092/orders-dlq-flink",
    )


def test_each_hop_is_balanced_by_the_reader_its_kinds_choose():
    """Written by hand: the job's kind and its output's store kind pick the reader."""
    from lineage_assets.conservation import archive, iceberg_ingestion_hop, orders_source, spark_days, supplier_windows
    from lineage_assets.conservation.rules import reader_of, reconciled_hops

    found = reconciled_hops(Pipeline.from_settings(StackSettings()))
    assert {name: (h.job.kind, h.output.store_kind, reader_of(h)) for name, h in found.items()} == {
        "orders-source": ("cdc_source", "kafka_topic", orders_source.balance),
        "orders-s3-sink": ("copy", "object_prefix", archive.balance),
        "supplier-stats": ("windowed_aggregation", "kafka_topic", supplier_windows.balance),
        "iceberg-ingestion": ("copy", "iceberg_table", iceberg_ingestion_hop.balance),
        "dagster.supplier_stats": ("batch_aggregation", "iceberg_table", spark_days.balance),
    }


def test_a_job_of_a_kind_no_reader_balances_is_not_a_reconciled_hop_and_naming_it_says_why():
    from dataclasses import replace

    import pytest

    from lineage_assets.conservation.hops import hops
    from lineage_assets.conservation.rules import reader_of

    pipeline = Pipeline.from_settings(StackSettings())
    hop = hops(pipeline)["orders-source"]
    odd = replace(hop, job=replace(hop.job, kind="batch_aggregation"))
    with pytest.raises(KeyError, match="no conservation reader for job 'orders-source' of kind 'batch_aggregation'"):
        reader_of(odd)


def test_a_job_declared_with_a_kind_and_two_inputs_is_refused():
    from dataclasses import replace

    import pytest

    job = Pipeline.from_settings(StackSettings()).job("supplier-stats")
    with pytest.raises(ValueError, match="reads 2 datasets"):
        replace(job, inputs=("kafka_orders", "source_orders"))


def test_store_kinds_follow_the_namespace_and_the_catalog_name():
    pipeline = Pipeline.from_settings(StackSettings())
    assert {k: d.store_kind for k, d in pipeline.datasets.items()} == {
        "source_orders": "postgres_table",
        "kafka_orders": "kafka_topic",
        "archive_orders": "object_prefix",
        "kafka_supplier_stats": "kafka_topic",
        "iceberg_orders": "iceberg_table",
        "iceberg_supplier_stats": "iceberg_table",
        "dlq_orders_s3_sink": "kafka_topic",
        "dlq_iceberg_ingestion": "kafka_topic",
        "dlq_supplier_stats": "kafka_topic",
    }


def test_dead_letters_are_declared_on_the_job_and_must_be_one_of_its_outputs():
    from dataclasses import replace

    import pytest

    pipeline = Pipeline.from_settings(StackSettings())
    assert pipeline.dead_letter_jobs() == ("orders-s3-sink", "supplier-stats", "iceberg-ingestion")
    assert pipeline.dead_letter_dataset("supplier-stats").name == "orders-dlq-supplier-stats"
    assert pipeline.output("supplier-stats").key == "kafka_supplier_stats"
    with pytest.raises(KeyError, match="job 'orders-source' declares no dead letters"):
        pipeline.dead_letter_dataset("orders-source")
    job = pipeline.job("supplier-stats")
    with pytest.raises(ValueError, match="declares dead letters 'dlq_orders_s3_sink', which is not one of its"):
        replace(job, dead_letters="dlq_orders_s3_sink")
