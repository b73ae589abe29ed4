"""The schema registry, through confluent-kafka's client: the latest value schema of a topic, its columns, and the
compatibility rule each subject the pipeline writes is held to.

Every subject gets its rule set explicitly, not inherited from the registry's global default, so a registry shared
with other teams (or Apicurio, whose own default is NONE) cannot loosen it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from lineage_assets.lineage.identity import Column

#: a new version must read every earlier version's records: a consumer replaying the topic from its start with the
#: newest schema never meets a record it cannot read. A new optional column (Debezium gives it a null default)
#: passes; a new column without a default or a retyped field is refused when the producer registers it.
SUBJECT_COMPATIBILITY = "BACKWARD_TRANSITIVE"


class RegistryError(RuntimeError):
    """The registry refused or did not answer; the message says which subject and what to check."""


@dataclass(frozen=True)
class RegisteredSchema:
    subject: str
    schema_id: int
    version: int
    columns: tuple[Column, ...]

    @property
    def label(self) -> str:
        """``<schema id>/v<version>``: what sensors remember and show."""
        return f"{self.schema_id}/v{self.version}"


def subject_of(topic: str) -> str:
    """The value subject of a topic (TopicNameStrategy, what Debezium and Flink's avro-confluent use)."""
    return f"{topic}-value"


def avro_columns(schema_str: str) -> tuple[Column, ...]:
    """Columns of an Avro record schema, as the schema facet shows them (nullable unions unwrapped, logical
    types by their logical name)."""
    record = json.loads(schema_str)
    columns = []
    for f in record.get("fields", []):
        t = f["type"]
        if isinstance(t, list):
            t = next((x for x in t if x != "null"), "null")
        if isinstance(t, dict):
            t = t.get("logicalType") or t.get("type")
        columns.append(Column(f["name"], str(t), f.get("doc", "")))
    return tuple(columns)


@dataclass(frozen=True)
class Registry:
    """The schema registry's Confluent-compatible API root, and its basic-auth credentials when it has them."""

    url: str
    user_info: str = ""  # "user:password"
    #: seconds to connect and to wait for each answer (a registry that never answers is reported, not waited on)
    timeout_s: float = 10.0

    @classmethod
    def of(cls, value: Registry | str) -> Registry:
        return value if isinstance(value, Registry) else cls(value)

    def __str__(self) -> str:
        return self.url

    def client(self) -> SchemaRegistryClient:
        conf: dict[str, object] = {"url": self.url, "timeout": self.timeout_s}
        if self.user_info:
            conf["basic.auth.user.info"] = self.user_info
        return SchemaRegistryClient(conf)


def latest_schema(url: Registry | str, topic: str) -> RegisteredSchema | None:
    """The topic's latest registered value schema; None when the subject is not registered or the registry does
    not answer (callers then report what they know without it)."""
    subject = subject_of(topic)
    try:
        latest = Registry.of(url).client().get_latest_version(subject)
    except SchemaRegistryError as exc:
        if exc.http_status_code in (401, 403):  # not "unregistered": the deployment's credentials are wrong
            raise RegistryError(
                f"the schema registry at {url} refused the credentials (HTTP {exc.http_status_code}): set "
                "LINEAGE_LAB_SCHEMA_REGISTRY_USER_INFO (or the kafka resource's schema_registry_user_info) to "
                "user:password it accepts"
            ) from exc
        return None
    except (OSError, httpx.TransportError):  # refused, reset, or no answer within the client's timeout
        return None
    return RegisteredSchema(subject, latest.schema_id, latest.version, avro_columns(latest.schema.schema_str))


def ensure_compatibility(url: Registry | str, topic: str, level: str = SUBJECT_COMPATIBILITY) -> str:
    """Set the value subject's own compatibility rule (also before its first version is registered); returns the
    rule the registry now holds for it."""
    subject = subject_of(topic)
    client = Registry.of(url).client()
    try:
        client.set_compatibility(subject_name=subject, level=level)
        held = client.get_compatibility(subject_name=subject)
    except (SchemaRegistryError, OSError, httpx.TransportError) as exc:
        raise RegistryError(
            f"setting compatibility {level} on subject {subject} at {url} failed ({exc}): is the registry up "
            "(`lineage-lab stack status`), is LINEAGE_LAB_SCHEMA_REGISTRY_PORT (or ..._EXTERNAL_SCHEMA_REGISTRY) "
            "right, and LINEAGE_LAB_SCHEMA_REGISTRY_USER_INFO set when it needs credentials?"
        ) from exc
    if held != level:
        raise RegistryError(f"the registry at {url} holds {held} for subject {subject} after setting {level}")
    return held
