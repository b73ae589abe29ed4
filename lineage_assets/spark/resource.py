"""dagster-pyspark's PySparkResource, with the OpenLineage Spark listener configured per Dagster run.

The listener is a SparkContext listener: its settings (transport, parent run) must be in place when the context
starts, so the session is built per run with the Dagster run as OpenLineage parent and the listener writing to a
per-run file; ``forward_events`` then puts those events into the lineage outbox (never lost, even with the lineage
backend down)."""

import os
import uuid
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource
from dagster_pyspark.resources import spark_session_from_config
from pydantic import PrivateAttr

from infra.spark import secret_conf


class LineageSparkResource(PySparkResource):
    #: static configuration: catalog, S3FileIO, listener jars (infra.spark.spark_conf without secrets)
    spark_config: dict[str, Any]
    #: secrets, kept out of spark_config so that they can come from the environment (EnvVar) and stay hidden
    s3_access_key: str = ""
    s3_secret_key: str = ""
    catalog_token: str = ""
    catalog_credential: str = ""
    #: process environment the driver JVM needs (AWS SDK)
    environment: dict[str, str]
    openlineage_namespace: str
    events_dir: str
    #: the application's name (its job's simple name) and the job of its parent run, from the identity module
    app_name: str
    parent_job_name: str
    _events_path: Path | None = PrivateAttr(default=None)
    _parent: tuple[str, str] | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run = context.run
        run_id = run.run_id if run else str(uuid.uuid4())
        self._events_path = Path(self.events_dir) / f"{run_id}.ndjson"
        self._events_path.parent.mkdir(parents=True, exist_ok=True)
        self._parent = (run_id, self.parent_job_name)
        os.environ.update(self.environment)
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:  # one SparkContext per process: ours needs this run's listener settings
            active.stop()
        conf = {
            **self.spark_config,
            **secret_conf(self.s3_access_key, self.s3_secret_key, self.catalog_token, self.catalog_credential),
            "spark.app.name": self.app_name,
            "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
            "spark.openlineage.namespace": self.openlineage_namespace,
            "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": str(self._events_path),
            "spark.openlineage.transport.append": "true",
            "spark.openlineage.parentJobNamespace": self.openlineage_namespace,
            # one stable parent job whatever Dagster job ran it (spark/lineage.py names the app's jobs under it)
            "spark.openlineage.parentJobName": self.parent_job_name,
            "spark.openlineage.parentRunId": run_id,
        }
        self._spark_session = spark_session_from_config(conf)

    @property
    def events_path(self) -> Path:
        assert self._events_path is not None, "the resource is not set up"
        return self._events_path

    @property
    def parent(self) -> tuple[str, str]:
        """(run id, job name) of the Dagster run the Spark application runs under."""
        assert self._parent is not None
        return self._parent
