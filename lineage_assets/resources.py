"""The wiring of the Dagster resources: ``build_resources`` builds each technology's resource (each defined in its
technology's folder) from ``StackSettings`` (the embedded stack, overridable with LINEAGE_LAB_* variables); every
field can also be set in Dagster config for a real deployment. Secrets are read from the environment, never written
here."""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace

import dagster as dg

from infra.settings import ENV_PREFIX, KAFKA_SECRET_FIELDS, StackSettings
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.source.resource import SourceDatabaseResource
from lineage_assets.storage import IcebergResource, ObjectStoreResource


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
        "connect": ConnectResource(
            url=settings.connect_url,
            config_topic=settings.connect_config_topic,
            kafka_bootstrap=settings.kafka_bootstrap,
            schema_registry_url=settings.schema_registry_url,
            # the user name only: the password stays in the workers' environment
            schema_registry_user=settings.schema_registry_user_info.split(":", 1)[0],
            source_db_host=settings.postgres_address[0],
            source_db_port=settings.postgres_address[1],
            s3_endpoint=settings.s3_endpoint,
            s3_region=settings.s3_region,
            archive_bucket=settings.archive_bucket,
            archive_rotate_s=settings.archive_rotate_s,
        ),
        "flink": FlinkResource(
            rest_url=settings.flink_rest_url,
            savepoint_dir=settings.flink_savepoint_dir,
            cluster_python=settings.flink_cluster_python,
            stack_host=settings.host,
            stack_rest_port=settings.flink_rest_port,
            stack_home=str(settings.home),
            s3_region=settings.s3_region,
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
            connect_timeout_s=settings.store_connect_timeout_s,
            read_timeout_s=settings.store_read_timeout_s,
        ),
    }


def opened_resources(settings: StackSettings, keys: Iterable[str]) -> SimpleNamespace:
    """The wired resources named by ``keys`` as a Dagster run gets them (each ``EnvVar`` read from the environment),
    for code that runs outside a run: the CLI, ``stack down``'s suspension, the main job's own waits, benchmarks.
    The one way to do it: none of these resources needs setting up, so no ephemeral Dagster instance is made for
    them (``dg.build_resources`` would make one, 2-3 s). Spark's does need it, and is refused."""
    keys = tuple(keys)
    if "spark" in keys:
        raise ValueError("the spark resource starts a Spark session when set up: use it inside a Dagster run")
    wired = build_resources(settings)
    unknown = sorted(set(keys) - set(wired))
    if unknown:
        raise KeyError(f"no resource {unknown}; the wired ones: {sorted(wired)}")
    return SimpleNamespace(**{key: _resolved(wired[key]) for key in keys})


def _resolved(resource: dg.ConfigurableResource) -> dg.ConfigurableResource:
    """The resource with each ``EnvVar`` field replaced by the variable's value (an unset variable raises)."""
    return type(resource)(
        **{name: value.get_value() if isinstance(value, dg.EnvVar) else value for name, value in resource}
    )


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
