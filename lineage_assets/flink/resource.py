"""The Dagster resource of the Flink session cluster the streaming jobs run on (built from the settings by
resources.build_resources)."""

from __future__ import annotations

import dataclasses

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.flink.client import FlinkClient


class FlinkResource(dg.ConfigurableResource):
    """The Flink session cluster the streaming jobs run on, by its REST URL (the stack's, or a team's own)."""

    rest_url: str
    #: where `stop with savepoint` writes; empty: the stack's directory, or an external cluster's own default
    savepoint_dir: str = ""
    #: the Python of an external cluster's TaskManagers; empty: this host's .venv-flink
    cluster_python: str = ""

    def client(self, settings: StackSettings) -> FlinkClient:
        """A client for this cluster: the stack's when the URL is the embedded one, else an external cluster."""
        embedded = f"http://{settings.host}:{settings.flink_rest_port}"
        external = "" if self.rest_url.rstrip("/") == embedded else self.rest_url
        return FlinkClient(
            dataclasses.replace(
                settings,
                external_flink=external,
                flink_savepoint_dir=self.savepoint_dir,
                flink_cluster_python=self.cluster_python,
            )
        )
