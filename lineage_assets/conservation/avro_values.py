"""Confluent wire-format Avro values decoded with their writer schema from the registry (one fetch per schema id):
how the conservation readers see orders and windows the way the jobs wrote them."""

from __future__ import annotations

import base64
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import fastavro
from confluent_kafka import Message

from lineage_assets.conservation.balance import StoreUnavailable

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class AvroValues:
    """Confluent wire-format Avro values decoded with their writer schema from the registry (one fetch per id)."""

    def __init__(self, registry) -> None:
        self.registry = registry
        self._schemas: dict[int, Any] = {}

    def decode(self, value: bytes | None) -> dict | None:
        """The record, or None when it is not wire format / does not decode (a bad record, not a store fault)."""
        if not value or len(value) < 5 or value[0] != 0:
            return None
        schema_id = int.from_bytes(value[1:5], "big")
        if schema_id not in self._schemas:
            try:
                found = self.registry.client().get_schema(schema_id)
            except Exception as exc:
                status = getattr(exc, "http_status_code", None)
                if status == 404:
                    self._schemas[schema_id] = None
                    return None
                raise StoreUnavailable(
                    f"the schema registry at {self.registry.url} did not answer for schema id {schema_id} ({exc}); "
                    "start it (`lineage-lab stack up schema-registry`) or check LINEAGE_LAB_SCHEMA_REGISTRY_*, "
                    "then reconcile again"
                ) from exc
            self._schemas[schema_id] = fastavro.parse_schema(json.loads(found.schema_str))
        schema = self._schemas[schema_id]
        if schema is None:
            return None
        try:
            record = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema)
        except Exception:
            return None
        return record if isinstance(record, dict) else None


def millis(value: Any) -> int | None:
    if isinstance(value, datetime):
        return (value - EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, int):
        return value
    return None


def dead_raw_value(msg: Message) -> bytes | None:
    """The raw order a Flink job's dead letter carries (JSON, the bytes as base64): both Flink jobs write them so."""
    try:
        raw = json.loads(msg.value() or b"null").get("raw_value")
        return base64.b64decode(raw) if isinstance(raw, str) else None
    except (ValueError, AttributeError):
        return None
