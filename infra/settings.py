"""Where the embedded stack lives and which ports it binds.

Every address any part of lineage-lab uses (services, Dagster resources, lineage identity) is derived from one
``StackSettings``. Defaults point at the embedded stack on 127.0.0.1; each value can be overridden with an
environment variable ``LINEAGE_LAB_<NAME>`` so the same code runs against a real deployment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_PREFIX = "LINEAGE_LAB_"


class SettingsError(ValueError):
    """A setting from the environment cannot be used."""


def _default_home() -> Path:
    return REPO_ROOT / ".lab"


@dataclass(frozen=True)
class StackSettings:
    """Ports, credentials and directories of the embedded stack (override with LINEAGE_LAB_<FIELD>)."""

    home: Path = field(default_factory=_default_home)
    host: str = "127.0.0.1"

    postgres_port: int = 15432
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    schema_registry_port: int = 8085
    object_store_port: int = 9000
    connect_port: int = 8083
    iceberg_catalog_port: int = 8181
    marquez_port: int = 5000
    marquez_admin_port: int = 5001
    marquez_web_port: int = 3001
    flink_rest_port: int = 8081
    flink_rpc_port: int = 6123
    dagster_port: int = 3000

    # Local development credentials of the embedded stack only; a real deployment sets its own.
    s3_access_key: str = "lineagelab"
    s3_secret_key: str = "lineagelab-secret"
    s3_region: str = "us-east-1"
    warehouse_bucket: str = "warehouse"
    archive_bucket: str = "orders-archive"

    postgres_superuser: str = "postgres"
    postgres_password: str = "postgres"
    marquez_db_password: str = "marquez"
    catalog_db_password: str = "iceberg"
    registry_db_password: str = "registry"
    source_db_password: str = "orders"

    # OpenLineage namespace of every job of the pipeline
    openlineage_namespace: str = "lineage-lab"
    # runs the lineage drainer delivers to Marquez at once (each run's events stay in order)
    lineage_drain_workers: int = 4
    # share of a source topic's new records that may go to a dead-letter topic before its asset check fails
    dead_letter_max_share: float = 0.01
    # minutes after which a streaming output is late in Dagster's freshness status when its job neither wrote new
    # data nor was seen running and caught up with its input
    streaming_fresh_minutes: int = 15
    # the plausibility window of an order's bid_time around processing time (flink_jobs/valid_order.py): an order
    # outside it is dead-lettered by both Flink jobs instead of moving (or missing) the event-time clock
    order_max_future_s: int = 3600
    order_max_past_s: int = 7 * 24 * 3600
    # where the supplier_stats Spark application runs: local mode in the Dagster process, or a cluster's master URL
    # (spark://host:port of a standalone cluster, k8s://..., yarn); on a cluster the jars go to the executors
    spark_master: str = "local[2]"
    spark_executor_memory: str = "1g"
    # Dagster runs the stack's daemon runs at once (Spark runs are further limited to one by their pool)
    dagster_max_concurrent_runs: int = 2

    # JVM heap caps (MiB) sized so that the whole stack plus Dagster fits a 2-core, 24 GiB machine.
    kafka_heap_mb: int = 512
    connect_heap_mb: int = 768
    schema_registry_heap_mb: int = 384
    object_store_heap_mb: int = 256
    iceberg_catalog_heap_mb: int = 384
    marquez_heap_mb: int = 512
    flink_jobmanager_mb: int = 1024
    flink_taskmanager_mb: int = 3072

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> StackSettings:
        """Defaults overridden by ``LINEAGE_LAB_<FIELD>`` variables; a malformed value is a clear error."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            if f.type in ("int", int):
                try:
                    values[f.name] = int(raw)
                except ValueError as exc:
                    raise SettingsError(
                        f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a whole number; set it to a port or size"
                    ) from exc
            elif f.type in ("float", float):
                try:
                    values[f.name] = float(raw)
                except ValueError as exc:
                    raise SettingsError(f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a number, e.g. 0.01") from exc
            elif f.type in ("Path", Path):
                values[f.name] = Path(raw).expanduser().resolve()
            else:
                values[f.name] = raw
        return cls(**values)  # type: ignore[arg-type]

    def as_env(self) -> dict[str, str]:
        """These settings as LINEAGE_LAB_* variables, for child processes that run lineage-lab code themselves
        (the lineage drainer, Dagster): they then serve this deployment, not the defaults."""
        return {ENV_PREFIX + f.name.upper(): str(getattr(self, f.name)) for f in fields(self)}

    # Directories -------------------------------------------------------------------------------------------
    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    @property
    def jars_dir(self) -> Path:
        """Resolved JVM artifacts, one folder per bundle of ``infra/artifacts.toml``."""
        override = os.environ.get(ENV_PREFIX + "JARS_DIR")
        if override:
            return Path(override)
        return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lineage-lab" / "jars"

    @property
    def flink_venv(self) -> Path:
        return Path(os.environ.get(ENV_PREFIX + "FLINK_VENV", REPO_ROOT / ".venv-flink"))

    # Endpoints ---------------------------------------------------------------------------------------------
    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def schema_registry_url(self) -> str:
        """The registry's Confluent-compatible API root."""
        return f"http://{self.host}:{self.schema_registry_port}/apis/ccompat/v7"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.host}:{self.object_store_port}"

    @property
    def connect_url(self) -> str:
        return f"http://{self.host}:{self.connect_port}"

    @property
    def iceberg_catalog_url(self) -> str:
        return f"http://{self.host}:{self.iceberg_catalog_port}"

    @property
    def marquez_url(self) -> str:
        return f"http://{self.host}:{self.marquez_port}"

    @property
    def marquez_web_url(self) -> str:
        return f"http://{self.host}:{self.marquez_web_port}"

    @property
    def flink_rest_url(self) -> str:
        return f"http://{self.host}:{self.flink_rest_port}"

    @property
    def lineage_outbox(self) -> Path:
        """The durable queue every lineage emitter of this deployment writes to."""
        return self.data_dir / "lineage" / "outbox.sqlite"

    @property
    def warehouse_uri(self) -> str:
        return f"s3://{self.warehouse_bucket}/"

    def aws_sdk_env(self) -> dict[str, str]:
        """Environment for AWS SDK v2 clients (S3FileIO, the S3 sink) talking to the object store: its region, and
        checksums only where required (s3proxy and other S3-compatible stores do not all support the defaults)."""
        return {
            "AWS_REGION": self.s3_region,
            "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
            "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
        }

    def postgres_dsn(self, database: str, user: str, password: str) -> str:
        return f"postgresql://{user}:{password}@{self.host}:{self.postgres_port}/{database}"

    def jdbc_url(self, database: str) -> str:
        return f"jdbc:postgresql://{self.host}:{self.postgres_port}/{database}"
