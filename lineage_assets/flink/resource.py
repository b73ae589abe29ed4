"""The Dagster resource of the Flink session cluster the streaming jobs run on (built from the settings by
resources.build_resources)."""

from __future__ import annotations

from pathlib import Path

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
    #: the embedded stack's cluster, by host and REST port: ``rest_url`` naming it is the stack's cluster
    #: (checkpoints and savepoints under the stack's data directory); empty or another URL: an external cluster
    stack_host: str = ""
    stack_rest_port: int = StackSettings.flink_rest_port
    #: the stack's home, where Flink's CLI (submit, stop with savepoint) runs from (FLINK_HOME, its client conf/)
    #: and the stack's cluster keeps its state; empty: the default home
    stack_home: str = ""
    #: the object store's region, for the AWS SDK of a job's driver (the CLI's environment)
    s3_region: str = StackSettings.s3_region

    @property
    def embedded(self) -> bool:
        """Whether ``rest_url`` is the stack's own cluster."""
        own = f"http://{self.stack_host}:{self.stack_rest_port}"
        return bool(self.stack_host) and self.rest_url.rstrip("/") == own

    def client(self) -> FlinkClient:
        """A client for this cluster: the stack's when the URL is the stack's own, else an external cluster."""
        home = {"home": Path(self.stack_home)} if self.stack_home else {}
        where = (
            {"host": self.stack_host, "flink_rest_port": self.stack_rest_port, "external_flink": ""}
            if self.embedded
            else {"external_flink": self.rest_url}
        )
        return FlinkClient(
            StackSettings(
                **home,
                **where,
                flink_savepoint_dir=self.savepoint_dir,
                flink_cluster_python=self.cluster_python,
                s3_region=self.s3_region,
            )
        )
