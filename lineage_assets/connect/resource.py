"""The Dagster resource of a Kafka Connect cluster, by its REST URL (built from the settings by
resources.build_resources)."""

from __future__ import annotations

import dagster as dg

from lineage_assets.connect.client import ConnectClient


class ConnectResource(dg.ConfigurableResource):
    url: str
    #: the workers' config.storage.topic: where Connect records each connector's creation and deletion, which tells
    #: a connector deleted and created again under the same name from the one before
    config_topic: str = "_connect-configs"

    def client(self) -> ConnectClient:
        return ConnectClient(self.url)
