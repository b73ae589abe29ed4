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
