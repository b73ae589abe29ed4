"""The Dagster resource of where lineage goes: the outbox the assets and sensors emit into, and Marquez, where the
checks read lineage back (built from the settings by resources.build_resources)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.lineage.outbox import LineageEmitter, Outbox


class LineageResource(dg.ConfigurableResource):
    """Where lineage goes: the durable outbox (drained by the lineage-drainer service) and Marquez, where the
    checks read it back."""

    outbox_path: str
    backend_url: str
    #: sent as "Authorization: Bearer <key>" (OpenLineage's HTTP transport does the same) when set
    api_key: str = ""

    def emitter(self) -> LineageEmitter:
        return LineageEmitter(Path(self.outbox_path), self.backend_url, api_key=self.api_key)

    def outbox(self) -> Outbox:
        return Outbox(Path(self.outbox_path))

    def marquez(self) -> MarquezClient:
        return MarquezClient(self.backend_url, api_key=self.api_key or None)
