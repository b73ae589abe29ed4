"""Connector configurations: JSON files under ``connect/connectors/`` with ``@{placeholders}`` filled from the
stack's settings, so one file serves every environment. Secrets stay out of Connect's config topic: the files
reference them as ``${env:NAME}``, which the worker's EnvVarConfigProvider resolves when it starts a task."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from string import Template

from infra.settings import REGISTRY_PASSWORD_ENV, REPO_ROOT, StackSettings
from lineage_assets.lineage.identity import DEAD_LETTER_TOPICS

CONNECTORS_DIR = REPO_ROOT / "connect" / "connectors"


class _ConnectorTemplate(Template):
    delimiter = "@"  # "$" belongs to Connect's own ${provider:key} references


class ConnectorConfigError(ValueError):
    """A connector file is missing, malformed, or uses a placeholder the settings do not provide."""


def apicurio_api(settings: StackSettings) -> str:
    """The registry's native Apicurio API, which the connectors' Apicurio converter speaks: derived from the
    Confluent-compatible root (``.../apis/ccompat/v7`` -> ``.../apis/registry/v2``)."""
    ccompat = settings.schema_registry_url
    if "/apis/ccompat/" not in ccompat:
        raise ConnectorConfigError(
            f"the schema registry {ccompat} is not an Apicurio registry's ccompat API (.../apis/ccompat/v7): the "
            "connectors use Apicurio's Avro converter; point LINEAGE_LAB_EXTERNAL_SCHEMA_REGISTRY at an Apicurio "
            "registry, or change the converter in connect/connectors/*.json"
        )
    return ccompat.split("/apis/ccompat/", 1)[0] + "/apis/registry/v2"


def template_values(settings: StackSettings) -> dict[str, str]:
    return {
        "kafka_bootstrap": settings.kafka_bootstrap,
        "registry_api": apicurio_api(settings),
        "db_host": settings.postgres_address[0],
        "db_port": str(settings.postgres_address[1]),
        "s3_endpoint": settings.s3_endpoint,
        "s3_region": settings.s3_region,
        "archive_bucket": settings.archive_bucket,
        "sink_dead_letter_topic": DEAD_LETTER_TOPICS["orders-s3-sink"],
    }


def render_connector(name: str, settings: StackSettings, directory: Path = CONNECTORS_DIR) -> dict[str, str]:
    path = directory / f"{name}.json"
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConnectorConfigError(f"no connector file {path}: {exc}") from exc
    try:
        rendered = _ConnectorTemplate(text).substitute(template_values(settings))
    except KeyError as exc:
        raise ConnectorConfigError(f"{path}: placeholder @{{{exc.args[0]}}} is not a known setting") from exc
    except ValueError as exc:
        raise ConnectorConfigError(f"{path}: {exc}") from exc
    try:
        config = json.loads(rendered)
    except ValueError as exc:
        raise ConnectorConfigError(f"{path} is not valid JSON once rendered: {exc}") from exc
    if not isinstance(config, dict) or "connector.class" not in config:
        raise ConnectorConfigError(f"{path} must be a JSON object with connector.class")
    config = {k: str(v) for k, v in config.items()}
    if settings.schema_registry_user_info and "value.converter.apicurio.registry.url" in config:
        # basic auth of the converter; the password stays in the worker's environment, out of the config topic
        config["value.converter.apicurio.auth.username"] = settings.schema_registry_user_info.split(":", 1)[0]
        config["value.converter.apicurio.auth.password"] = f"${{env:{REGISTRY_PASSWORD_ENV}}}"
    return config


def config_version(config: dict[str, str]) -> str:
    """A short, stable fingerprint of a rendered config: what a materialization records as deployed."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
