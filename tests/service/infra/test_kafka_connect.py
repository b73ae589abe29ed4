"""Connect's REST API lists the plugins the pipeline's connectors need, and the S3 sink plugin archives."""

import json
import time
import uuid
from pathlib import Path

import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from infra.services.kafka_connect import PLUGIN_PREFIX, plugin_bundles
from infra.services.object_store import s3_client


def test_worker_lists_the_pipeline_plugins(settings):
    plugins = requests.get(f"{settings.connect_url}/connector-plugins", params={"connectorsOnly": "false"}, timeout=10)
    plugins.raise_for_status()
    classes = {p["class"]: p["type"] for p in plugins.json()}
    assert classes.get("io.debezium.connector.postgresql.PostgresConnector") == "source"
    assert classes.get("lab.lineage.connect.s3.S3JsonLinesSinkConnector") == "sink"
    assert classes.get("io.apicurio.registry.utils.converter.AvroConverter") == "converter"


def test_every_plugin_bundle_is_one_isolated_plugin_folder(settings):
    worker_conf = (settings.conf_dir / "kafka-connect" / "connect-distributed.properties").read_text()
    plugin_path = Path(
        next(line for line in worker_conf.splitlines() if line.startswith("plugin.path=")).split("=", 1)[1]
    )
    folders = {p.name for p in plugin_path.iterdir() if p.is_dir()}
    assert folders == {b.removeprefix(PLUGIN_PREFIX) for b in plugin_bundles()}


def test_s3_sink_archives_records_as_json_lines(settings):
    topic = f"smoke-archive-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    sent = [f"o-{i}" for i in range(5)]
    for order_id in sent:
        producer.produce(topic, key=order_id, value=json.dumps({"order_id": order_id, "price": "1.00"}))
    assert producer.flush(30) == 0

    connector = {
        "connector.class": "lab.lineage.connect.s3.S3JsonLinesSinkConnector",
        "topics": topic,
        "tasks.max": "1",
        "s3.bucket.name": settings.archive_bucket,
        "s3.prefix": "smoke/",
        "s3.endpoint": settings.s3_endpoint,
        "aws.access.key.id": settings.s3_access_key,
        "aws.secret.access.key": settings.s3_secret_key,
        "flush.size": "5",
        "rotate.interval.ms": "0",
        "consumer.override.auto.offset.reset": "earliest",
    }
    url = f"{settings.connect_url}/connectors/{topic}"
    requests.put(f"{url}/config", json=connector, timeout=30).raise_for_status()
    s3 = s3_client(settings)
    prefix = f"smoke/topics/{topic}/"
    try:
        deadline = time.monotonic() + 90
        objects = []
        while time.monotonic() < deadline and not objects:
            objects = s3.list_objects_v2(Bucket=settings.archive_bucket, Prefix=prefix).get("Contents", [])
            time.sleep(1)
        assert objects, f"nothing archived under {prefix}; connector status: {requests.get(url + '/status').text}"
        body = s3.get_object(Bucket=settings.archive_bucket, Key=objects[0]["Key"])["Body"].read().decode()
        assert [json.loads(line)["order_id"] for line in body.splitlines()] == sent
    finally:
        requests.delete(url, timeout=30)
        for obj in s3.list_objects_v2(Bucket=settings.archive_bucket, Prefix=prefix).get("Contents", []):
            s3.delete_object(Bucket=settings.archive_bucket, Key=obj["Key"])
        admin.delete_topics([topic])
