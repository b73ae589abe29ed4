"""50 poison records among 1,000 orders on Kafka `orders`: every job that reads it dead-letters the 50, the
dead_letter_sensor records one observation per dead-letter topic with the counts by reason, and the source topic's
dead_letter_share check fails at a 1 % threshold and passes at 10 %."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.jobs import STREAMING
from lineage_assets.kafka.dead_letter_monitor import build_dead_letter_sensor, build_dead_letter_share_check
from lineage_assets.kafka.topics import end_offsets
from lineage_assets.lineage.identity import DEAD_LETTER_TOPICS
from lineage_assets.metadata import asset_key
from lineage_assets.source.generator import generate_orders_job
from tests.service.lineage_assets.conftest import wait_until_quiet
from tests.support.engine_waits import wait_for_a_checkpoint_from_now, wait_for_checkpoints

defs = build_definitions(StackSettings.from_env())

GOOD, POISON = 1000, 50
#: the Flink jobs that write dead letters in Kafka transactions, written out by hand
FLINK_JOBS = ["iceberg-ingestion", "supplier-stats"]


@pytest.fixture(scope="module")
def deployed(pipeline):
    """Both connectors and both Flink jobs running (a no-op when they already run), and the orders' Avro schema
    registered (Debezium registers it with the first order it captures)."""
    keys = [asset_key(pipeline.dataset(k)) for k in STREAMING]
    result = dg.materialize(
        [*defs.assets], selection=dg.AssetSelection.assets(*keys), resources=defs.resources, raise_on_error=False
    )
    assert result.success
    registry = SchemaRegistryClient({"url": defs.resources["kafka"].schema_registry_url})
    if "orders-value" not in registry.get_subjects():
        run = generate_orders_job.execute_in_process(
            run_config={"ops": {"generate_orders": {"config": {"count": 1}}}}, resources=defs.resources
        )
        assert run.success
        deadline = time.monotonic() + 60
        while "orders-value" not in registry.get_subjects() and time.monotonic() < deadline:
            time.sleep(1)


def produce(settings, good: int = GOOD, poison: int = POISON) -> None:
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    schema = registry.get_latest_version("orders-value").schema.schema_str
    serialize = AvroSerializer(registry, schema, conf={"auto.register.schemas": False})
    ctx = SerializationContext("orders", MessageField.VALUE)
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 20})
    now_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    for i in range(good + poison):
        if poison and i % (good // poison + 1) == 0 and i // (good // poison + 1) < poison:
            producer.produce("orders", key=b"poison", value=b"this is not avro")
            continue
        order_id = str(uuid.uuid4())
        order = {"supplier": "Alice", "item": "Lamp", "price": "12.50", "bid_time": now_ms, "order_id": order_id}
        producer.produce("orders", key=order_id.encode(), value=serialize(order, ctx))
    assert producer.flush(30) == 0


def tick(sensor, instance, cursor):
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=defs.resources) as ctx:
        result = sensor(ctx)
    for event in result.asset_events or []:
        instance.report_runless_asset_event(event)
    return list(result.asset_events or []), result.cursor


def test_poison_is_counted_by_reason_and_the_share_check_uses_the_threshold(settings, pipeline, deployed):
    sensor = build_dead_letter_sensor(pipeline, name="test_dead_letter_sensor")
    topics = set(DEAD_LETTER_TOPICS.values())
    wait_until_quiet(
        lambda: {t: sum(end_offsets(settings.kafka_bootstrap, t).values()) for t in topics}, "the dead-letter topics"
    )
    with dg.DagsterInstance.ephemeral() as instance:
        events, cursor = tick(sensor, instance, None)
        assert events == [], "the first look only notes where each topic is"
        before = {t: sum(end_offsets(settings.kafka_bootstrap, t).values()) for t in topics}
        produce(settings)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            grown = {t: sum(end_offsets(settings.kafka_bootstrap, t).values()) - before[t] for t in topics}
            if all(n >= POISON for n in grown.values()):
                break
            time.sleep(2)
        assert all(n >= POISON for n in grown.values()), f"dead letters written: {grown}"
        # the Flink jobs' dead letters, written (the end offsets above), become readable (read-committed) once a
        # checkpoint triggered after them completes
        wait_for_a_checkpoint_from_now(settings, FLINK_JOBS)

        events, cursor = tick(sensor, instance, cursor)
        observed = {e.asset_key: e.metadata for e in events}
        assert len(events) == len(topics), "one observation per dead-letter topic"
        for job, topic in DEAD_LETTER_TOPICS.items():
            key = asset_key(pipeline.dead_letter_dataset(job))
            meta = observed[key]
            assert meta["new_dead_letters"].value == POISON, topic
            by_reason = meta["by_reason"].value
            assert sum(by_reason.values()) == POISON and len(by_reason) == 1, f"{topic}: {by_reason}"
            assert meta["source_records"].value >= GOOD + POISON
            assert 0.01 < meta["dead_letter_share"].value < 0.10
        assert tick(sensor, instance, cursor)[0] == [], "nothing new: no observation"

        def share_check(limit: float) -> dg.AssetCheckEvaluation:
            check = build_dead_letter_share_check(pipeline, limit)
            result = dg.materialize(
                [*defs.assets, check],
                selection=dg.AssetSelection.checks(check),
                instance=instance,
                resources=defs.resources,
            )
            (evaluation,) = result.get_asset_check_evaluations()
            return evaluation

        strict = share_check(0.01)
        assert not strict.passed
        assert all(t in strict.description for t in topics), strict.description
        assert share_check(0.10).passed

        # clean orders afterwards: the next look observes a share of 0 and the alarm ends
        produce(settings, good=50, poison=0)
        wait_for_checkpoints(settings, FLINK_JOBS)  # the jobs have read and committed them
        events, cursor = tick(sensor, instance, cursor)
        assert {e.metadata["dead_letter_share"].value for e in events} == {0.0}, events
        assert share_check(0.01).passed
