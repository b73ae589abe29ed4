"""The event builder every emitter of a running pipeline uses: declared identities, with the schemas the source
side holds now (the orders topic's latest registered version). So the source table, the topic and the archive get
a new dataset version in Marquez when the source gains an optional column, and every emitter describes them alike
(two emitters with different schemas for one dataset would make Marquez flip between two versions).

It lives beside the registry it asks, above the lineage core, which then knows nothing of Kafka."""

from __future__ import annotations

from lineage_assets.kafka.registry import RegisteredSchema, Registry, latest_schema
from lineage_assets.lineage.events import EventBuilder
from lineage_assets.lineage.identity import Pipeline


def observed_event_builder(
    pipeline: Pipeline, registry_url: Registry | str
) -> tuple[EventBuilder, RegisteredSchema | None]:
    """(the builder, the orders topic's latest value schema or None when unregistered or unreachable)."""
    registered = latest_schema(registry_url, pipeline.dataset("kafka_orders").name)  # a topic's dataset name
    return EventBuilder(pipeline, pipeline.observed_columns(registered.columns if registered else None)), registered
