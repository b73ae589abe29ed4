"""Client settings of the clusters the jobs talk to, handed to the job's driver in its environment so that secrets
(SASL passwords, registry credentials, catalog tokens) never appear on a command line.

The deploying asset (lineage_assets/flink/deploy.py ``job_environment``) sets these variables for the ``flink run``
process only; the driver turns them into connector options and into arguments of the Python functions. Also here,
as both drivers write one: the Kafka table of a job's dead letters (this module is shipped with every job).
"""

from __future__ import annotations

import json
import os

KAFKA_PROPERTIES = "LINEAGE_LAB_JOB_KAFKA_PROPERTIES"  # JSON object of Java Kafka client properties
REGISTRY_USER_INFO = "LINEAGE_LAB_JOB_REGISTRY_USER_INFO"  # "user:password" for the registry's basic auth
CATALOG_TOKEN = "LINEAGE_LAB_JOB_ICEBERG_CATALOG_TOKEN"  # bearer token of the Iceberg REST catalog
CATALOG_CREDENTIAL = "LINEAGE_LAB_JOB_ICEBERG_CATALOG_CREDENTIAL"  # "client_id:secret" for the catalog's OAuth2
S3_ACCESS_KEY = "LINEAGE_LAB_JOB_S3_ACCESS_KEY"  # the object store's keys, for Iceberg's S3FileIO
S3_SECRET_KEY = "LINEAGE_LAB_JOB_S3_SECRET_KEY"


def sql_string(value: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def sql_options(options: dict[str, str]) -> str:
    """Extra ``'key' = 'value'`` lines for a WITH clause, each with a leading comma (empty for none)."""
    return "".join(f",\n            {sql_string(k)} = {sql_string(v)}" for k, v in options.items())


def kafka_properties(environ: dict[str, str] | None = None) -> dict[str, str]:
    raw = (os.environ if environ is None else environ).get(KAFKA_PROPERTIES, "")
    if not raw:
        return {}
    props = json.loads(raw)
    if not isinstance(props, dict):
        raise ValueError(f"{KAFKA_PROPERTIES} must be a JSON object of Kafka client properties")
    return {str(k): str(v) for k, v in props.items()}


def kafka_sql_options(environ: dict[str, str] | None = None) -> str:
    """The Kafka client properties as options of a Kafka table (``properties.`` prefix)."""
    return sql_options({f"properties.{k}": v for k, v in kafka_properties(environ).items()})


def dead_letter_table(
    table: str,
    columns: tuple[str, ...],
    topic: str,
    bootstrap: str,
    max_bytes: int,
    transactional_id_prefix: str,
    environ: dict[str, str] | None = None,
) -> str:
    """``CREATE TEMPORARY TABLE`` of a job's dead-letter sink (``columns``: ``name TYPE`` each): JSON records in
    Kafka transactions, exactly-once like the job's output, and up to ``max_bytes`` each, so that a dead letter is
    never what fails (and restarts) the job."""
    column_lines = ",\n            ".join(columns)
    return f"""
        CREATE TEMPORARY TABLE {table} (
            {column_lines}
        ) WITH (
            'connector' = 'kafka',
            'topic' = '{topic}',
            'properties.bootstrap.servers' = '{bootstrap}',
            'properties.transaction.timeout.ms' = '600000',
            'sink.delivery-guarantee' = 'exactly-once',
            'properties.max.request.size' = '{max_bytes}',
            'sink.transactional-id-prefix' = '{transactional_id_prefix}',
            'format' = 'json'{kafka_sql_options(environ)}
        )"""


def registry_user_info(environ: dict[str, str] | None = None) -> str:
    return (os.environ if environ is None else environ).get(REGISTRY_USER_INFO, "")


def registry_sql_options(format_prefix: str, environ: dict[str, str] | None = None) -> str:
    """Basic-auth options of Flink's avro-confluent format (``format_prefix`` e.g. ``value.avro-confluent``)."""
    info = registry_user_info(environ)
    if not info:
        return ""
    return sql_options(
        {f"{format_prefix}.basic-auth.credentials-source": "USER_INFO", f"{format_prefix}.basic-auth.user-info": info}
    )


def catalog_sql_options(environ: dict[str, str] | None = None) -> str:
    """Credentials of the Iceberg REST catalog (Iceberg's ``token`` / ``credential`` catalog properties)."""
    env = os.environ if environ is None else environ
    options = {}
    if env.get(CATALOG_TOKEN):
        options["token"] = env[CATALOG_TOKEN]
    if env.get(CATALOG_CREDENTIAL):
        options["credential"] = env[CATALOG_CREDENTIAL]
    return sql_options(options)


def timeout_sql_options(connect_ms: int, read_ms: int) -> str:
    """Connect and read limits of the catalog's REST client and of S3FileIO's HTTP client: without them Iceberg's
    REST client waits 3 minutes to connect and forever for an answer, so a hung catalog held a commit (and with it
    the job's checkpoints) instead of failing it; a failed commit restarts the job from its last checkpoint, so
    nothing is lost or written twice."""
    return sql_options(
        {
            "rest.client.connection-timeout-ms": str(connect_ms),
            "rest.client.socket-timeout-ms": str(read_ms),
            "http-client.apache.connection-timeout-ms": str(connect_ms),
            "http-client.apache.socket-timeout-ms": str(read_ms),
        }
    )


def s3_sql_options(environ: dict[str, str] | None = None) -> str:
    """The object store's keys as Iceberg catalog options (empty: S3FileIO's default credential chain)."""
    env = os.environ if environ is None else environ
    options = {}
    if env.get(S3_ACCESS_KEY):
        options["s3.access-key-id"] = env[S3_ACCESS_KEY]
    if env.get(S3_SECRET_KEY):
        options["s3.secret-access-key"] = env[S3_SECRET_KEY]
    return sql_options(options)
