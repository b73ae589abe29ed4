"""Dagster resources for the systems the pipeline touches. Defaults come from ``StackSettings`` (the embedded
stack, overridable with LINEAGE_LAB_* variables); every field can also be set in Dagster config for a real
deployment. Secrets are read from the environment, never written here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import psycopg

from infra.services.iceberg_catalog import CATALOG_NAME, catalog_credentials, pyiceberg_properties_for
from infra.services.object_store import s3_client_for
from infra.settings import ENV_PREFIX, KAFKA_SECRET_FIELDS, KAFKA_SECURITY_FIELDS, StackSettings
from lineage_assets.connect.client import ConnectClient
from lineage_assets.flink.client import FlinkClient
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.registry import Registry
from lineage_assets.lineage.marquez import MarquezClient
from lineage_assets.lineage.outbox import LineageEmitter, Outbox


class KafkaResource(dg.ConfigurableResource):
    """A Kafka cluster and its schema registry, with the client security settings of a secured cluster (SASL/TLS
    as librdkafka names them; the Flink jobs and Connect get the Java equivalents)."""

    bootstrap_servers: str
    schema_registry_url: str
    security_protocol: str = ""
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = ""
    ssl_ca_location: str = ""
    #: "user:password" of a registry behind HTTP basic auth
    schema_registry_user_info: str = ""

    def connection(self) -> KafkaConnection:
        security = {name: getattr(self, name) for name in KAFKA_SECURITY_FIELDS}
        return KafkaConnection(self.bootstrap_servers, **security).validated()

    def registry(self) -> Registry:
        return Registry(self.schema_registry_url, self.schema_registry_user_info)


class ConnectResource(dg.ConfigurableResource):
    url: str
    #: the workers' config.storage.topic: where Connect records each connector's creation and deletion, which tells
    #: a connector deleted and created again under the same name from the one before
    config_topic: str = "_connect-configs"

    def client(self) -> ConnectClient:
        return ConnectClient(self.url)


class SourceDatabaseResource(dg.ConfigurableResource):
    """The PostgreSQL database holding the orders table that Debezium captures."""

    host: str
    port: int
    dbname: str
    user: str
    password: str
    #: a superuser of the same server, only to install the schema guard (event triggers need one); empty: not
    #: installed, and the source table's asset says so
    admin_user: str = ""
    admin_password: str = ""

    def connect(self, admin: bool = False) -> psycopg.Connection:
        return psycopg.connect(
            host=self.host,
            port=self.port,
            dbname=self.dbname,
            user=self.admin_user if admin else self.user,
            password=self.admin_password if admin else self.password,
            autocommit=True,
            connect_timeout=5,
        )


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


class ObjectStoreResource(dg.ConfigurableResource):
    endpoint: str
    access_key_id: str
    secret_access_key: str
    region: str

    def client(self):
        return s3_client_for(self.endpoint, self.access_key_id, self.secret_access_key, self.region)


class IcebergResource(dg.ConfigurableResource):
    """The Iceberg REST catalog, read with pyiceberg (table metadata, snapshots, row counts)."""

    uri: str
    s3_endpoint: str
    access_key_id: str
    secret_access_key: str
    region: str
    #: a bearer token, or OAuth2 client credentials "client_id:secret", of a catalog that requires them
    token: str = ""
    credential: str = ""

    def catalog(self):
        from pyiceberg.catalog import load_catalog

        props = pyiceberg_properties_for(
            self.uri, self.s3_endpoint, self.access_key_id, self.secret_access_key, self.region
        )
        props.update(catalog_credentials(self.token, self.credential))
        return load_catalog(CATALOG_NAME, **props)


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


def _env_or(name: str, default: str) -> str | dg.EnvVar:
    import os

    return dg.EnvVar(name) if os.environ.get(name) else default


def _kafka_security(settings: StackSettings) -> dict[str, str | dg.EnvVar]:
    """The Kafka resource's security fields: the secrets as references to their variables when those are set."""
    return {
        name: _env_or(f"{ENV_PREFIX}KAFKA_{name.upper()}", value) if name in KAFKA_SECRET_FIELDS else value
        for name, value in settings.kafka_security().items()
    }


def build_resources(settings: StackSettings) -> dict[str, dg.ConfigurableResource]:
    return {
        "kafka": KafkaResource(
            bootstrap_servers=settings.kafka_bootstrap,
            schema_registry_url=settings.schema_registry_url,
            **_kafka_security(settings),
            schema_registry_user_info=_env_or(
                "LINEAGE_LAB_SCHEMA_REGISTRY_USER_INFO", settings.schema_registry_user_info
            ),
        ),
        "connect": ConnectResource(url=settings.connect_url, config_topic=settings.connect_config_topic),
        "flink": FlinkResource(
            rest_url=settings.flink_rest_url,
            savepoint_dir=settings.flink_savepoint_dir,
            cluster_python=settings.flink_cluster_python,
        ),
        "source_db": SourceDatabaseResource(
            host=settings.postgres_address[0],
            port=settings.postgres_address[1],
            dbname="orders_source",
            user="orders",
            password=_env_or("LINEAGE_LAB_SOURCE_DB_PASSWORD", settings.source_db_password),
            admin_user=settings.postgres_superuser,
            admin_password=_env_or("LINEAGE_LAB_POSTGRES_PASSWORD", settings.postgres_password),
        ),
        "object_store": ObjectStoreResource(
            endpoint=settings.s3_endpoint,
            access_key_id=_env_or("LINEAGE_LAB_S3_ACCESS_KEY", settings.s3_access_key),
            secret_access_key=_env_or("LINEAGE_LAB_S3_SECRET_KEY", settings.s3_secret_key),
            region=settings.s3_region,
        ),
        "lineage": LineageResource(
            outbox_path=str(settings.lineage_outbox),
            backend_url=settings.marquez_url,
            api_key=_env_or("LINEAGE_LAB_MARQUEZ_API_KEY", settings.marquez_api_key),
        ),
        "spark": build_spark_resource(settings),
        "iceberg": IcebergResource(
            uri=settings.iceberg_catalog_url,
            s3_endpoint=settings.s3_endpoint,
            access_key_id=_env_or("LINEAGE_LAB_S3_ACCESS_KEY", settings.s3_access_key),
            secret_access_key=_env_or("LINEAGE_LAB_S3_SECRET_KEY", settings.s3_secret_key),
            region=settings.s3_region,
            token=_env_or("LINEAGE_LAB_ICEBERG_CATALOG_TOKEN", settings.iceberg_catalog_token),
            credential=_env_or("LINEAGE_LAB_ICEBERG_CATALOG_CREDENTIAL", settings.iceberg_catalog_credential),
        ),
    }


def build_spark_resource(settings: StackSettings):
    from infra.spark import spark_conf
    from lineage_assets.lineage.identity import SPARK_SUPPLIER_STATS_JOB, Pipeline
    from lineage_assets.spark.resource import LineageSparkResource

    job = Pipeline.from_settings(settings).job(SPARK_SUPPLIER_STATS_JOB)
    assert job.parent is not None
    return LineageSparkResource(
        spark_config=spark_conf(settings, job.simple_name, openlineage=None, secrets=False),
        s3_access_key=_env_or("LINEAGE_LAB_S3_ACCESS_KEY", settings.s3_access_key),
        s3_secret_key=_env_or("LINEAGE_LAB_S3_SECRET_KEY", settings.s3_secret_key),
        catalog_token=_env_or("LINEAGE_LAB_ICEBERG_CATALOG_TOKEN", settings.iceberg_catalog_token),
        catalog_credential=_env_or("LINEAGE_LAB_ICEBERG_CATALOG_CREDENTIAL", settings.iceberg_catalog_credential),
        app_name=job.simple_name,
        parent_job_name=job.parent,
        environment=settings.aws_sdk_env(),
        openlineage_namespace=settings.openlineage_namespace,
        events_dir=str(settings.data_dir / "openlineage" / "spark"),
    )
