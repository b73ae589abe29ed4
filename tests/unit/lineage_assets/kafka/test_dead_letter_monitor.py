"""Dead letters counted by kind of reason: a reason's particulars (values, ids) do not split its kind."""

import json

from lineage_assets.kafka.dead_letter_monitor import (
    CONNECT_ERROR_CLASS,
    CONNECT_ERROR_MESSAGE,
    reason_kind,
    record_reason,
)


def test_reasons_of_one_kind_count_together():
    assert reason_kind("unparsable price 'abc'") == reason_kind("unparsable price 'x1'")
    assert reason_kind("unknown schema id 12") == reason_kind("unknown schema id 9000")
    assert reason_kind("not Confluent wire format (length 16, first byte 74)") == "not Confluent wire format"
    assert reason_kind("late: bid_time 2026-11-23T10:00:00Z arrived after its window closed") == "late"
    assert reason_kind("price '1e309' is not a finite number") != reason_kind("unparsable price '1e309'")
    assert reason_kind("") == "unknown"


def test_the_reason_of_a_flink_letter_and_of_a_connect_letter():
    flink = json.dumps({"src_topic": "orders", "raw_value": "AAE=", "reason": "unknown schema id 7"}).encode()
    assert record_reason(flink, None) == "unknown schema id 7"
    connect = [
        (CONNECT_ERROR_CLASS, b"org.apache.kafka.connect.errors.DataException"),
        (CONNECT_ERROR_MESSAGE, b"Converting byte[] to Kafka Connect data failed"),
    ]
    assert reason_kind(record_reason(b"raw", connect)) == "DataException"
    assert record_reason(b"\x00not json", None).startswith("no reason given")
