import json
import uuid

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "lineage_lab.smoke",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "price", "type": "string"},
        {"name": "bid_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def test_avro_schema_registered_fetched_and_used_for_a_record(settings):
    client = SchemaRegistryClient({"url": settings.schema_registry_url})
    subject = f"smoke-{uuid.uuid4().hex[:8]}-value"
    schema_id = client.register_schema(subject, Schema(json.dumps(ORDER_SCHEMA), "AVRO"))

    assert json.loads(client.get_schema(schema_id).schema_str)["name"] == "Order"
    assert client.get_latest_version(subject).schema_id == schema_id

    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    record = {"order_id": "o-1", "price": "99.90", "bid_time": 1_700_000_000_000}
    payload = AvroSerializer(client, json.dumps(ORDER_SCHEMA), conf={"auto.register.schemas": False})(record, ctx)
    assert payload[0] == 0 and int.from_bytes(payload[1:5], "big") == schema_id, "Confluent wire format"

    fresh = SchemaRegistryClient({"url": settings.schema_registry_url})  # no cache: fetches the schema by id
    decoded = AvroDeserializer(fresh)(payload, ctx)
    assert decoded["order_id"] == "o-1" and decoded["price"] == "99.90"
    assert decoded["bid_time"].timestamp() == 1_700_000_000
