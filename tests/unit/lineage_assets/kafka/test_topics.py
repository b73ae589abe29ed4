"""Reading offsets when the broker is not there: a named error that says what to check (a closed port on
loopback, no Kafka needed)."""

import pytest

from lineage_assets.kafka.topics import KafkaUnavailable, TopicSpec, consumer_lag, dead_letter_capacity, end_offsets


def test_a_broker_that_does_not_answer_is_named_with_what_to_check():
    with pytest.raises(KafkaUnavailable, match=r"Kafka at 127\.0\.0\.1:1 did not answer within 2 s .*stack status"):
        end_offsets("127.0.0.1:1", "orders", timeout=2)
    with pytest.raises(KafkaUnavailable):
        consumer_lag("127.0.0.1:1", "orders", "some-group", timeout=2)


def test_a_dead_letter_topic_holds_the_largest_source_record_base64_encoded_with_its_reason():
    import base64
    import json

    source_max = 1_048_588  # Kafka's default max.message.bytes
    letter = json.dumps(
        {
            "src_topic": "orders",
            "raw_value": base64.b64encode(b"x" * source_max).decode(),
            "reason": "r" * 1000,
            "record_key": "k" * 200,
        }
    )
    assert len(letter.encode()) < dead_letter_capacity(source_max)
    spec = TopicSpec("orders-dlq", 1, 1000, max_message_bytes=dead_letter_capacity(source_max))
    assert spec.configs["max.message.bytes"] == str(dead_letter_capacity(source_max))
    assert "max.message.bytes" not in TopicSpec("orders", 3, 1000).configs, "the broker's default otherwise"
