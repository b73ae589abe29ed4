from infra.settings import StackSettings
from lineage_assets.flink.sensor import build_flink_job_sensor, iceberg_facts, topic_facts, tracked_jobs
from lineage_assets.lineage.identity import Pipeline


def test_the_sensor_follows_every_flink_job_of_the_identity_module():
    pipeline = Pipeline.from_settings(StackSettings())
    followed = [(t.name, t.dataset_key, t.consumer_group, t.output_facts) for t in tracked_jobs(pipeline)]
    assert followed == [
        ("iceberg-ingestion", "iceberg_orders", "iceberg-ingestion", iceberg_facts),
        ("supplier-stats", "kafka_supplier_stats", "supplier-stats", topic_facts),
    ]
    sensor = build_flink_job_sensor(pipeline, StackSettings().streaming_fresh_minutes)
    assert sensor.description.startswith("Follows the Flink jobs (iceberg-ingestion, supplier-stats) by name")
