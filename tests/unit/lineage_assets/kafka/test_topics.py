"""Reading offsets when the broker is not there: a named error that says what to check (a closed port on
loopback, no Kafka needed)."""

import pytest

from lineage_assets.kafka.topics import KafkaUnavailable, consumer_lag, end_offsets


def test_a_broker_that_does_not_answer_is_named_with_what_to_check():
    with pytest.raises(KafkaUnavailable, match=r"Kafka at 127\.0\.0\.1:1 did not answer within 2 s .*stack status"):
        end_offsets("127.0.0.1:1", "orders", timeout=2)
    with pytest.raises(KafkaUnavailable):
        consumer_lag("127.0.0.1:1", "orders", "some-group", timeout=2)
