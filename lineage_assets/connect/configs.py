"""Connector configurations: JSON files under ``connect/connectors/`` with ``@{placeholders}`` filled from the
Connect resource's endpoints (as the workers see them), so one file serves every environment. Secrets stay out of
Connect's config topic: the files reference them as ``${env:NAME}``, which the worker's EnvVarConfigProvider
resolves when it starts a task."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from string import Template

from infra.settings import REGISTRY_PASSWORD_ENV, REPO_ROOT
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.lineage.identity import DEAD_LETTER_TOPICS

CONNECTORS_DIR = REPO_ROOT / "connect" / "connectors"


class _ConnectorTemplate(Template):
    delimiter = "@"  # "$" belongs to Connect's own ${provider:key} references


class ConnectorConfigError(ValueError):
    """A connector file is missing, malformed, or uses a placeholder the resource does not provide."""


def apicurio_api(ccompat: str) -> str:
    """The registry's native Apicurio API, which the connectors' Apicurio converter speaks: derived from the
    Confluent-compatible root ``ccompat`` (``.../apis/ccompat/v7`` -> ``.../apis/registry/v2``)."""
    if "/apis/ccompat/" not in ccompat:
        raise ConnectorConfigError(
            f"the schema registry {ccompat} is not an Apicurio registry's ccompat API (.../apis/ccompat/v7): the "
            "connectors use Apicurio's Avro converter; point LINEAGE_LAB_EXTERNAL_SCHEMA_REGISTRY at an Apicurio "
            "registry, or change the converter in connect/connectors/*.json"
        )
    return ccompat.split("/apis/ccompat/", 1)[0] + "/apis/registry/v2"


def template_values(connect: ConnectResource) -> dict[str, str]:
    """The placeholders' values; one whose endpoint the resource does not give is left out (a file that uses it
    fails to render)."""
    values = {
        "kafka_bootstrap": connect.kafka_bootstrap,
        "db_host": connect.source_db_host,
        "db_port": str(connect.source_db_port) if connect.source_db_port else "",
        "s3_endpoint": connect.s3_endpoint,
        "s3_region": connect.s3_region,
        "archive_bucket": connect.archive_bucket,
        "archive_rotate_ms": str(connect.archive_rotate_s * 1000),
        "sink_dead_letter_topic": DEAD_LETTER_TOPICS["orders-s3-sink"],
    }
    if connect.schema_registry_url:
        values["registry_api"] = apicurio_api(connect.schema_registry_url)
    return {name: value for name, value in values.items() if value}


def render_connector(name: str, connect: ConnectResource, directory: Path = CONNECTORS_DIR) -> dict[str, str]:
    path = directory / f"{name}.json"
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConnectorConfigError(f"no connector file {path}: {exc}") from exc
    try:
        rendered = _ConnectorTemplate(text).substitute(template_values(connect))
    except KeyError as exc:
        raise ConnectorConfigError(
            f"{path}: placeholder @{{{exc.args[0]}}} is not an endpoint the connect resource gives"
        ) from exc
    except ValueError as exc:
        raise ConnectorConfigError(f"{path}: {exc}") from exc
    try:
        config = json.loads(rendered)
    except ValueError as exc:
        raise ConnectorConfigError(f"{path} is not valid JSON once rendered: {exc}") from exc
    if not isinstance(config, dict) or "connector.class" not in config:
        raise ConnectorConfigError(f"{path} must be a JSON object with connector.class")
    config = {k: str(v) for k, v in config.items()}
    if connect.schema_registry_user and "value.converter.apicurio.registry.url" in config:
        # basic auth of the converter; the password stays in the worker's environment, out of the config topic
        config["value.converter.apicurio.auth.username"] = connect.schema_registry_user
        config["value.converter.apicurio.auth.password"] = f"${{env:{REGISTRY_PASSWORD_ENV}}}"
    return config


def config_version(config: dict[str, str]) -> str:
    """A short, stable fingerprint of a rendered config: what a materialization records as deployed."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
