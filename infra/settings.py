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
class KafkaClientSettings:
    """How a client reaches a Kafka cluster: its bootstrap servers and its security settings (librdkafka names).
    Declared once, here at the bottom, for both sides: ``StackSettings`` hands them out (``kafka_security``), the
    app's ``KafkaConnection`` builds the client configurations from them, and the Dagster resource takes them as
    its config fields of the same names. What each means: ``StackSettings``'s ``kafka_*`` fields."""

    bootstrap: str
    security_protocol: str = ""
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = ""
    ssl_ca_location: str = ""


#: the security settings of a Kafka client, by name (``StackSettings`` prefixes each with ``kafka_``)
KAFKA_SECURITY_FIELDS = tuple(f.name for f in fields(KafkaClientSettings) if f.name != "bootstrap")
#: those of them that are secrets (Dagster config reads them from the environment, never stores the value)
KAFKA_SECRET_FIELDS = ("sasl_username", "sasl_password")
#: the Connect worker's environment variable holding the schema registry's password: the worker's launch sets it and
#: the connector configs reference it as ${env:...} (EnvVarConfigProvider), so both sides take the name from here
REGISTRY_PASSWORD_ENV = "LINEAGE_LAB_SCHEMA_REGISTRY_PASSWORD"


@dataclass(frozen=True)
class StackSettings:
    """Ports, credentials and directories of the embedded stack (override with LINEAGE_LAB_<FIELD>)."""

    home: Path = field(default_factory=_default_home)
    # the address this machine's services are reached at (and advertise to their clients: Kafka's listener, Connect's
    # REST, Flink's RPC); in a container, the container's own name
    host: str = "127.0.0.1"
    # the address they listen on; empty: ``host``. A container sets 0.0.0.0 so that its Docker network reaches it.
    bind_host: str = ""

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
    dagster_db_password: str = "dagster"

    # External services (issue 15): an endpoint set here is used as is and `stack up` does not start that service.
    # Empty: the embedded service on host:port above. Dataset namespaces follow these endpoints.
    external_postgres: str = ""  # host:port of the PostgreSQL server holding the stack's databases
    external_kafka: str = ""  # bootstrap servers, host:port[,host:port...]
    external_schema_registry: str = ""  # the Confluent-compatible API root, e.g. https://registry:8081
    external_connect: str = ""  # Kafka Connect REST, e.g. http://connect:8083
    #: the Connect workers' config.storage.topic (the embedded worker's is _connect-configs)
    connect_config_topic: str = "_connect-configs"
    external_flink: str = ""  # a Flink session cluster's REST URL, e.g. http://jobmanager:8081
    external_iceberg_catalog: str = ""  # an Iceberg REST catalog, e.g. https://catalog:8181
    external_object_store: str = ""  # an S3 endpoint, e.g. https://s3.eu-west-1.amazonaws.com
    external_marquez: str = ""  # Marquez's API (or any OpenLineage HTTP backend with Marquez's read API)
    external_marquez_web: str = ""  # Marquez's web UI, for links
    external_dagster: str = ""  # the Dagster webserver, e.g. http://dagster-webserver:3000 (runs are submitted there)
    # where `stop with savepoint` writes; empty: the stack's data dir, or an external cluster's state.savepoints.dir
    flink_savepoint_dir: str = ""
    # the Python (with apache-flink 2.0 and flink_jobs/requirements.txt) on an external cluster's TaskManagers;
    # empty: this machine's .venv-flink, right for a cluster on this host
    flink_cluster_python: str = ""

    # Client credentials of external services: secrets, set them in the environment (never in the repository).
    # Kafka clients (confluent-kafka, the Flink jobs, Connect): librdkafka/Java security settings.
    kafka_security_protocol: str = ""  # PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
    kafka_sasl_mechanism: str = ""  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    kafka_sasl_username: str = ""
    kafka_sasl_password: str = ""
    kafka_ssl_ca_location: str = ""  # a PEM file of the CA that signed the brokers' certificates
    schema_registry_user_info: str = ""  # "user:password" for HTTP basic auth
    iceberg_catalog_token: str = ""  # a bearer token for the REST catalog
    iceberg_catalog_credential: str = ""  # "client_id:client_secret" for the catalog's OAuth2 token endpoint
    marquez_api_key: str = ""  # sent as "Authorization: Bearer <key>", like OpenLineage's HTTP transport

    # OpenLineage namespace of every job of the pipeline
    openlineage_namespace: str = "lineage-lab"
    # runs the lineage drainer delivers to Marquez at once (each run's events stay in order)
    lineage_drain_workers: int = 4
    # share of a source topic's new records that may go to a dead-letter topic before its asset check fails
    dead_letter_max_share: float = 0.01
    # minutes after which a streaming output is late in Dagster's freshness status when its job neither wrote new
    # data nor was seen running and caught up with its input
    streaming_fresh_minutes: int = 15
    # seconds a hop's records may stay pending (read, not yet committed, flushed or emitted) before its
    # `conservation` check warns
    conservation_pending_warn_s: int = 600
    # seconds a monitoring sensor lets pass between two runs of the checks of what it materialized (while data flows
    # it materializes every tick; what it materializes in between is checked by the next run)
    check_run_interval_s: int = 60
    # minutes between two scheduled runs of every streaming asset's checks (a stopped job shows up there even when no
    # sensor materializes anything); a divisor of 60, so that the runs fall evenly in each hour
    checks_every_minutes: int = 5
    # seconds between two ticks of each sensor (the daemon's pace of observing the engines); a tick reads only what
    # the engines say now, so a shorter interval costs little CPU and shows changes sooner
    sensor_interval_s: int = 30
    # seconds a supplier_stats day may lag its newest orders while they flow: the new-orders sensor asks for a run
    # of a day once its last write is this old (a day never written at once); 0 asks for one per new snapshot. Less
    # than conservation_pending_warn_s, or the conservation check would warn about orders pending by design
    supplier_stats_freshness_s: int = 120
    # seconds the archive sink holds a partition's records when fewer than flush.size (100) arrived before it writes
    # them as an object (and Connect can commit their offsets): the connector's rotate.interval.ms
    archive_rotate_s: int = 60
    # seconds a client of a store (the Iceberg catalog and the object store, as pyiceberg reads them) waits to
    # connect, and then for each answer: a store that accepts connections and never answers is reported as not
    # answering after them, never waited on
    store_connect_timeout_s: float = 5.0
    store_read_timeout_s: float = 30.0
    # where reconciliation remembers its counts (empty: <home>/data/conservation/counts.sqlite)
    conservation_store: str = ""
    # the plausibility window of an order's bid_time around processing time (flink_jobs/valid_order.py): an order
    # outside it is dead-lettered by both Flink jobs instead of moving (or missing) the event-time clock
    order_max_future_s: int = 3600
    order_max_past_s: int = 7 * 24 * 3600
    # where the supplier_stats Spark application runs: local mode in the Dagster process, or a cluster's master URL
    # (spark://host:port of a standalone cluster, k8s://..., yarn); on a cluster the jars go to the executors
    spark_master: str = "local[2]"
    spark_executor_memory: str = "1g"
    # JVM options of the JVMs started for one job and gone within minutes: the Spark driver (in local mode the whole
    # application) and the Flink CLI, which plans and submits a job. C1 only and the serial collector halve a short
    # application's CPU (benchmarks/spark_driver_jit.py), most of which is start-up and C2 compilation competing
    # with the stack for 2 cores. For long, compute-heavy drivers on a cluster: `-XX:TieredStopAtLevel=4 -XX:+UseG1GC`
    # (the JVM's defaults)
    job_client_java_options: str = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
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
        settings = cls(**values)  # type: ignore[arg-type]
        settings.check_external()
        settings.check_budgets()
        return settings

    def check_budgets(self) -> None:
        """The supplier_stats freshness budget must end before the conservation check warns about what it defers; a
        sensor must wait between ticks; a streaming output's freshness window must hold Dagster's warning at half of
        it (Dagster refuses a warning window under a minute, with an error that names no setting)."""
        if self.streaming_fresh_minutes < 2:
            raise SettingsError(
                f"{ENV_PREFIX}STREAMING_FRESH_MINUTES={self.streaming_fresh_minutes}: a streaming output's freshness "
                "window must be at least 2 minutes (it warns at half the window, and Dagster's shortest warning is a "
                "minute); 15 by default"
            )
        if self.sensor_interval_s < 1:
            raise SettingsError(
                f"{ENV_PREFIX}SENSOR_INTERVAL_S={self.sensor_interval_s}: the seconds between two sensor ticks must be "
                "at least 1 (30 by default)"
            )
        if self.archive_rotate_s < 1:
            raise SettingsError(
                f"{ENV_PREFIX}ARCHIVE_ROTATE_S={self.archive_rotate_s}: the seconds the archive sink holds records "
                "before it writes them must be at least 1 (60 by default)"
            )
        every = self.checks_every_minutes
        if every < 1 or 60 % every:
            raise SettingsError(
                f"{ENV_PREFIX}CHECKS_EVERY_MINUTES={every}: the minutes between two scheduled check runs must divide "
                "an hour (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60; 5 by default)"
            )
        budget, warn = self.supplier_stats_freshness_s, self.conservation_pending_warn_s
        if not 0 <= budget < warn:
            raise SettingsError(
                f"{ENV_PREFIX}SUPPLIER_STATS_FRESHNESS_S={budget} must be at least 0 and less than "
                f"{ENV_PREFIX}CONSERVATION_PENDING_WARN_S={warn}: the conservation check would warn about orders the "
                "sensor defers by design; lower the budget or raise the warning"
            )

    def check_external(self) -> None:
        """External endpoints must be usable as given: http(s) URLs, and host:port pairs for Kafka."""
        from urllib.parse import urlsplit

        for f in fields(self):
            value = getattr(self, f.name)
            if not f.name.startswith("external_") or not value:
                continue
            variable = ENV_PREFIX + f.name.upper()
            if f.name in ("external_kafka", "external_postgres"):
                if f.name == "external_postgres" and "," in value:
                    raise SettingsError(f"{variable}={value!r}: name one PostgreSQL server, host:port")
                for server in value.split(","):
                    host, _, port = server.strip().rpartition(":")
                    if not host or not port.isdigit():
                        raise SettingsError(f"{variable}={value!r}: {server.strip()!r} is not host:port")
                continue
            url = urlsplit(value)
            try:
                url.port  # noqa: B018 - raises ValueError for a port that is not a number
            except ValueError:
                url = urlsplit("")
            if url.scheme not in ("http", "https") or not url.hostname:
                raise SettingsError(f"{variable}={value!r} is not an http(s) URL, e.g. https://host:port")

    def kafka_security(self) -> dict[str, str]:
        """The ``kafka_*`` security settings by their client names (``KAFKA_SECURITY_FIELDS``)."""
        return {name: getattr(self, f"kafka_{name}") for name in KAFKA_SECURITY_FIELDS}

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
    # (each the external endpoint when one is set, else the embedded service's)
    @property
    def listen_host(self) -> str:
        """The address the embedded services bind: ``bind_host`` when set, else ``host``."""
        return self.bind_host or self.host

    @property
    def postgres_address(self) -> tuple[str, int]:
        """(host, port) of the PostgreSQL server."""
        if self.external_postgres:
            host, _, port = self.external_postgres.strip().rpartition(":")
            return host, int(port)
        return self.host, self.postgres_port

    @property
    def dagster_url(self) -> str:
        return (self.external_dagster or f"http://{self.host}:{self.dagster_port}").rstrip("/")

    @property
    def kafka_bootstrap(self) -> str:
        return self.external_kafka or f"{self.host}:{self.kafka_port}"

    @property
    def schema_registry_url(self) -> str:
        """The registry's Confluent-compatible API root."""
        return (
            self.external_schema_registry or f"http://{self.host}:{self.schema_registry_port}/apis/ccompat/v7"
        ).rstrip("/")

    @property
    def s3_endpoint(self) -> str:
        return (self.external_object_store or f"http://{self.host}:{self.object_store_port}").rstrip("/")

    @property
    def connect_url(self) -> str:
        return (self.external_connect or f"http://{self.host}:{self.connect_port}").rstrip("/")

    @property
    def iceberg_catalog_url(self) -> str:
        return (self.external_iceberg_catalog or f"http://{self.host}:{self.iceberg_catalog_port}").rstrip("/")

    @property
    def marquez_url(self) -> str:
        return (self.external_marquez or f"http://{self.host}:{self.marquez_port}").rstrip("/")

    @property
    def marquez_web_url(self) -> str:
        return (self.external_marquez_web or f"http://{self.host}:{self.marquez_web_port}").rstrip("/")

    @property
    def flink_rest_url(self) -> str:
        return (self.external_flink or f"http://{self.host}:{self.flink_rest_port}").rstrip("/")

    def external(self) -> dict[str, str]:
        """The external services of this deployment: embedded service name -> the endpoint used instead."""
        pairs = {
            "postgres": self.external_postgres,
            "kafka": self.external_kafka,
            "schema-registry": self.external_schema_registry,
            "kafka-connect": self.external_connect,
            "flink-jobmanager": self.external_flink,
            "flink-taskmanager": self.external_flink,
            "iceberg-catalog": self.external_iceberg_catalog,
            "object-store": self.external_object_store,
            "marquez": self.external_marquez,
            "marquez-web": self.external_marquez_web or (self.external_marquez and "(none: Marquez is external)"),
            "dagster": self.external_dagster,
        }
        return {name: url for name, url in pairs.items() if url}

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
        host, port = self.postgres_address
        return f"postgresql://{user}:{password}@{host}:{port}/{database}"

    def jdbc_url(self, database: str) -> str:
        host, port = self.postgres_address
        return f"jdbc:postgresql://{host}:{port}/{database}"
