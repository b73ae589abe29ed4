"""The embedded stack, in start order. Each module owns one service."""

from __future__ import annotations

from collections.abc import Sequence

from infra.services.base import Service, ServiceError
from infra.services.dagster import DagsterDev
from infra.services.flink import FlinkJobManager, FlinkTaskManager
from infra.services.iceberg_catalog import IcebergCatalog
from infra.services.kafka import Kafka
from infra.services.kafka_connect import KafkaConnect
from infra.services.lineage_drainer import LineageDrainer
from infra.services.marquez import Marquez, MarquezWeb
from infra.services.object_store import ObjectStore
from infra.services.postgres import Postgres
from infra.services.schema_registry import SchemaRegistry
from infra.settings import StackSettings

# Start order: storage first, the lineage store, then Kafka and what talks to it, then the engines, then Dagster.
SERVICE_TYPES: tuple[type[Service], ...] = (
    Postgres,
    Marquez,
    MarquezWeb,
    ObjectStore,
    Kafka,
    SchemaRegistry,
    IcebergCatalog,
    KafkaConnect,
    FlinkJobManager,
    FlinkTaskManager,
    LineageDrainer,
    DagsterDev,
)


def build_stack(settings: StackSettings) -> list[Service]:
    return [cls(settings) for cls in SERVICE_TYPES]


def select(services: Sequence[Service], names: Sequence[str]) -> list[Service]:
    """The named services in stack order (all when no names); unknown names are a clear error."""
    if not names:
        return list(services)
    known = {s.name for s in services}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ServiceError(f"unknown service(s) {unknown}; the stack has {[s.name for s in services]}")
    return [s for s in services if s.name in names]
