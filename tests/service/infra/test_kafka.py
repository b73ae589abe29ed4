import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def test_record_round_trip_through_the_broker(settings):
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    try:
        producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
        producer.produce(topic, key=b"order-1", value=b'{"price": "12.50"}')
        assert producer.flush(30) == 0

        consumer = Consumer(
            {"bootstrap.servers": settings.kafka_bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([topic])
        msg = None
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                break
        consumer.close()
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value()) == (b"order-1", b'{"price": "12.50"}')
    finally:
        admin.delete_topics([topic])
