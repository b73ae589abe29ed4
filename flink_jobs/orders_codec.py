"""Decoding of `orders` records (Confluent wire-format Avro) shared by both Flink jobs, with a reason for each
record that cannot be an order. Pure Python (fastavro + the registry's Confluent-compatible API), so it is unit
tested without Flink and shipped to the cluster next to the job scripts.

A record is bad, and dead-lettered with the reason, when it is not Confluent wire format, names an unknown schema
id, does not decode, lacks a string field, has an unparsable price or a missing bid_time, or breaks the one rule
for a valid order (valid_order.py: price, bid_time inside the plausibility window, ...). Fields
the source added later (``OPTIONAL_STRINGS``) are carried when the record's writer schema has them and None when
it does not; any other field a newer schema adds is ignored. Registry
trouble other than "unknown id" raises: the job then fails and retries from its checkpoint instead of
dead-lettering good records.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import struct
import urllib.error
import urllib.request
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

try:  # on the Flink cluster both files are shipped side by side, top-level modules
    from valid_order import OrderRule
except ImportError:  # imported as part of the project (the Dagster code, the tests)
    from flink_jobs.valid_order import OrderRule

EPOCH = dt.datetime(1970, 1, 1)
REQUIRED_STRINGS = ("order_id", "supplier", "item", "price")
#: the optional columns of the orders topic (lineage_assets/lineage/identity.py declares them; a unit test holds the
#: two equal): read when present, None for records written before the source had them
OPTIONAL_STRINGS = ("currency",)


@dataclass(frozen=True)
class Order:
    order_id: str
    supplier: str
    item: str
    price: Decimal
    bid_time: dt.datetime  # naive UTC
    currency: str | None = None

    @property
    def bid_time_ms(self) -> int:
        return (self.bid_time - EPOCH) // dt.timedelta(milliseconds=1)


class BadRecord(ValueError):
    """The record is not a usable order; the message is the dead-letter reason."""


class RegistrySchemas:
    """Writer schemas by id from the registry's Confluent-compatible API, cached for the worker's life."""

    def __init__(self, registry_url: str, timeout: float = 10.0, user_info: str = "") -> None:
        self.registry_url = registry_url.rstrip("/")
        self.timeout = timeout
        #: "user:password" of a registry behind basic auth (the deployment's, never in the job's arguments)
        self.user_info = user_info
        self._parsed: dict[int, object] = {}

    def get(self, schema_id: int):
        """The parsed schema, or None when the registry does not know the id."""
        if schema_id in self._parsed:
            return self._parsed[schema_id]
        import fastavro

        request = urllib.request.Request(f"{self.registry_url}/schemas/ids/{schema_id}")
        if self.user_info:
            request.add_header("Authorization", "Basic " + base64.b64encode(self.user_info.encode()).decode())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as r:
                body = json.load(r)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        parsed = fastavro.parse_schema(json.loads(body["schema"]))
        self._parsed[schema_id] = parsed
        return parsed


def decode_order(value: bytes | None, schemas, rule: OrderRule | None = None, now: dt.datetime | None = None) -> Order:
    """One `orders` value -> a valid Order, or BadRecord with the reason. ``schemas.get(id)`` gives writer schemas;
    ``now`` (naive UTC, default: the clock) is the processing time the rule's plausibility window is around."""
    import fastavro

    if value is None:
        raise BadRecord("null value (tombstone)")
    value = bytes(value)
    if len(value) < 5 or value[0] != 0:
        raise BadRecord(f"not Confluent wire format (length {len(value)}, first byte {value[:1].hex() or '-'})")
    schema_id = struct.unpack(">I", value[1:5])[0]
    schema = schemas.get(schema_id)
    if schema is None:
        raise BadRecord(f"unknown schema id {schema_id}")
    buf = io.BytesIO(value[5:])
    try:
        rec = fastavro.schemaless_reader(buf, schema, None)
    except Exception as exc:  # truncated or corrupt payload: fastavro raises many types
        raise BadRecord(f"avro decode failed (schema id {schema_id}): {type(exc).__name__}: {exc}") from None
    if buf.tell() != len(value) - 5:
        raise BadRecord(f"avro decode left {len(value) - 5 - buf.tell()} trailing bytes (schema id {schema_id})")
    if not isinstance(rec, dict):
        raise BadRecord(f"value is not a record (schema id {schema_id})")
    for name in REQUIRED_STRINGS:
        if not isinstance(rec.get(name), str):
            raise BadRecord(f"{name} missing or not a string: {rec.get(name)!r}")
    try:
        price = Decimal(rec["price"])
    except InvalidOperation:
        raise BadRecord(f"unparsable price {rec['price']!r}") from None
    bid = rec.get("bid_time")
    if isinstance(bid, dt.datetime):  # fastavro applies timestamp-millis: an aware UTC datetime
        bid = bid.astimezone(dt.UTC).replace(tzinfo=None) if bid.tzinfo else bid
    elif isinstance(bid, int) and not isinstance(bid, bool):
        bid = EPOCH + dt.timedelta(milliseconds=bid)
    else:
        raise BadRecord(f"bid_time missing or null: {bid!r}")
    for name in OPTIONAL_STRINGS:
        if rec.get(name) is not None and not isinstance(rec[name], str):
            raise BadRecord(f"{name} is not a string: {rec[name]!r}")
    reason = (rule or OrderRule()).reason(rec["order_id"], rec["supplier"], price, bid, now or utc_now())
    if reason:
        raise BadRecord(reason)
    return Order(rec["order_id"], rec["supplier"], rec["item"], price, bid, rec.get("currency"))


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
