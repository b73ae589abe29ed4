"""Spark (PySpark) configured against the stack: the Iceberg REST catalog, S3FileIO on the object store, and the
OpenLineage Spark listener; local mode by default, or any cluster by its master URL (``LINEAGE_LAB_SPARK_MASTER``)."""

from __future__ import annotations

import os
from pathlib import Path

from infra.artifacts import ArtifactError, bundle_dir, is_resolved, load_manifest
from infra.services.iceberg_catalog import CATALOG_NAME, catalog_credentials
from infra.settings import StackSettings

BUNDLE = "spark-jars"
#: the one valid-order rule (OrderRule), which the Spark job calls for its rejected-order count
ORDER_RULE_BUNDLE = "flink-order-functions"


def spark_jars(settings: StackSettings) -> list[Path]:
    manifest = load_manifest()
    jars: list[Path] = []
    for name in (BUNDLE, ORDER_RULE_BUNDLE):
        if not is_resolved(settings.jars_dir, manifest[name]):
            raise ArtifactError(
                f"Spark's jars ({name}) are not resolved in {settings.jars_dir}; run `lineage-lab artifacts resolve`"
            )
        jars += sorted(bundle_dir(settings.jars_dir, name).glob("*.jar"))
    return jars


def secret_conf(access_key: str, secret_key: str, catalog_token: str = "", catalog_credential: str = "") -> dict:
    """The secret part of the catalog's configuration: S3 keys, and the REST catalog's token or OAuth2 credential."""
    cat = f"spark.sql.catalog.{CATALOG_NAME}"
    conf = {f"{cat}.s3.access-key-id": access_key, f"{cat}.s3.secret-access-key": secret_key}
    conf.update({f"{cat}.{k}": v for k, v in catalog_credentials(catalog_token, catalog_credential).items()})
    return conf


def spark_conf(
    settings: StackSettings,
    app_name: str,
    openlineage: dict[str, str] | None = None,
    secrets: bool = True,
) -> dict[str, str]:
    """Spark configuration for one application.

    ``openlineage`` holds ``spark.openlineage.*`` keys (transport, namespace, parent run); None leaves the
    listener off, for runs that must not emit lineage. ``secrets=False`` leaves out the object store's keys and
    the catalog's credentials (``secret_conf``), for configuration that is shown (Dagster's resource config).
    """
    jars = ":".join(str(p) for p in spark_jars(settings))
    cat = f"spark.sql.catalog.{CATALOG_NAME}"
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": app_name,
        "spark.driver.memory": "1g",
        "spark.driver.host": settings.host,
        "spark.driver.bindAddress": settings.host,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        # driver classpath (not spark.jars): local mode needs nothing more, and it avoids the listener's
        # reflective-access warnings on every query
        "spark.driver.extraClassPath": jars,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        cat: "org.apache.iceberg.spark.SparkCatalog",
        f"{cat}.type": "rest",
        f"{cat}.uri": settings.iceberg_catalog_url,
        f"{cat}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{cat}.s3.endpoint": settings.s3_endpoint,
        f"{cat}.s3.path-style-access": "true",
        f"{cat}.client.region": settings.s3_region,
        # Iceberg's REST client waits up to 3 min to connect and has no read limit unless told
        f"{cat}.rest.client.connection-timeout-ms": str(int(settings.store_connect_timeout_s * 1000)),
        f"{cat}.rest.client.socket-timeout-ms": str(int(settings.store_read_timeout_s * 1000)),
        "spark.sql.defaultCatalog": CATALOG_NAME,
    }
    if settings.job_client_java_options:
        conf["spark.driver.extraJavaOptions"] = settings.job_client_java_options
    if secrets:
        conf.update(
            secret_conf(
                settings.s3_access_key,
                settings.s3_secret_key,
                settings.iceberg_catalog_token,
                settings.iceberg_catalog_credential,
            )
        )
    if not settings.spark_master.startswith("local"):
        # executors run elsewhere: they fetch the jars from the driver and need the AWS SDK's environment too
        conf["spark.jars"] = ",".join(str(p) for p in spark_jars(settings))
        conf["spark.executor.memory"] = settings.spark_executor_memory
        conf.update({f"spark.executorEnv.{k}": v for k, v in spark_environment(settings).items()})
    if openlineage is not None:
        conf["spark.extraListeners"] = "io.openlineage.spark.agent.OpenLineageSparkListener"
        conf.update(openlineage)
    return conf


def spark_environment(settings: StackSettings) -> dict[str, str]:
    """Process environment the Spark driver JVM needs (AWS SDK v2 against the object store)."""
    return settings.aws_sdk_env()


def build_session(settings: StackSettings, app_name: str, openlineage: dict[str, str] | None = None):
    """A SparkSession for scripts and tests; Dagster assets get theirs from the PySpark resource."""
    from pyspark.sql import SparkSession

    os.environ.update(spark_environment(settings))
    builder = SparkSession.builder
    for key, value in spark_conf(settings, app_name, openlineage).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
