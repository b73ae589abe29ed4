"""The decoding both Flink jobs share: good orders come out whole, every kind of bad record gets its reason."""

import datetime as dt
import io
import struct
from decimal import Decimal

import fastavro
import pytest

from flink_jobs.orders_codec import BadRecord, decode_order

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "supplier", "type": "string"},
        {"name": "item", "type": "string"},
        {"name": "price", "type": "string"},
        {"name": "bid_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "order_id", "type": "string"},
    ],
}
NULLABLE_BID = {
    **ORDER,
    "fields": [*ORDER["fields"][:3], {"name": "bid_time", "type": ["null", "long"]}, ORDER["fields"][4]],
}


#: the next version Debezium registers after ``ALTER TABLE orders ADD COLUMN currency text`` (and one more column
#: nobody declared)
WITH_CURRENCY = {
    **ORDER,
    "fields": [
        *ORDER["fields"],
        {"name": "currency", "type": ["null", "string"], "default": None},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}
WITH_NUMERIC_CURRENCY = {**ORDER, "fields": [*ORDER["fields"], {"name": "currency", "type": "int"}]}


class Schemas:
    """Writer schemas by id, as the registry would answer (7 = orders, 8 = a nullable bid_time, 9 = orders after
    the source added currency, 10 = a currency of the wrong type)."""

    def __init__(self):
        self.parsed = {
            7: fastavro.parse_schema(ORDER),
            8: fastavro.parse_schema(NULLABLE_BID),
            9: fastavro.parse_schema(WITH_CURRENCY),
            10: fastavro.parse_schema(WITH_NUMERIC_CURRENCY),
        }

    def get(self, schema_id):
        return self.parsed.get(schema_id)


def wire(record: dict, schema_id: int = 7) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, Schemas().get(schema_id), record)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


NOW = dt.datetime(2025, 5, 1, 12, 0, 30)  # processing time of these tests (naive UTC)
GOOD = {
    "supplier": "Alice",
    "item": "Lamp",
    "price": "12.30",
    "bid_time": dt.datetime(2025, 5, 1, 12, 0, 1, 500000, tzinfo=dt.UTC),
    "order_id": "o-1",
}


def test_a_good_order_keeps_its_exact_price_and_utc_bid_time():
    order = decode_order(wire(GOOD), Schemas(), now=NOW)
    assert (order.order_id, order.supplier, order.item) == ("o-1", "Alice", "Lamp")
    assert order.price == Decimal("12.30")
    assert order.bid_time == dt.datetime(2025, 5, 1, 12, 0, 1, 500000)
    assert order.bid_time_ms == 1746100801500


def test_currency_is_carried_from_the_newer_schema_and_none_from_the_older():
    newer = decode_order(wire({**GOOD, "order_id": "o-2", "currency": "EUR", "coupon": "X"}, 9), Schemas(), now=NOW)
    older = decode_order(wire(GOOD), Schemas(), now=NOW)
    assert (newer.order_id, newer.currency, newer.price) == ("o-2", "EUR", Decimal("12.30"))
    assert older.currency is None
    assert decode_order(wire({**GOOD, "currency": None, "coupon": None}, 9), Schemas(), now=NOW).currency is None


def test_the_codec_carries_exactly_the_optional_columns_the_identity_module_declares():
    from flink_jobs.orders_codec import OPTIONAL_STRINGS
    from infra.settings import StackSettings
    from lineage_assets.lineage.identity import Pipeline

    topic = Pipeline.from_settings(StackSettings()).dataset("kafka_orders")
    assert set(OPTIONAL_STRINGS) == {c.name for c in topic.columns if c.optional}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "null value (tombstone)"),
        (b"definitely not avro", "not Confluent wire format (length 19, first byte 64)"),
        (b"\x00\x00", "not Confluent wire format (length 2, first byte 00)"),
        (b"\x00\x00\x00\x00\x63abc", "unknown schema id 99"),
        (wire(GOOD)[:-3], "avro decode failed (schema id 7)"),
        (wire(GOOD) + b"xx", "avro decode left 2 trailing bytes (schema id 7)"),
        (wire({**GOOD, "price": "abc"}), "unparsable price 'abc'"),
        (wire({**GOOD, "price": "NaN"}), "price NaN is not a finite number"),
        (wire({**GOOD, "bid_time": None}, 8), "bid_time missing or null: None"),
        (wire({**GOOD, "currency": 978}, 10), "currency is not a string: 978"),
    ],
)
def test_each_bad_record_names_what_is_wrong(value, reason):
    with pytest.raises(BadRecord) as raised:
        decode_order(value, Schemas(), now=NOW)
    assert str(raised.value).startswith(reason)
