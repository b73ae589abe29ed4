"""OpenLineage dataset naming, normalised so that every producer names one physical dataset identically.

Built on openlineage-python's naming helpers (``openlineage.client.naming.dataset``); what this module adds is the
normalisation the spec leaves to each integration and that, done differently, silently splits a lineage graph:
one broker of a bootstrap list, ``s3a://``/``s3n://`` as ``s3://``, and Iceberg tables by physical location the
way the OpenLineage Spark integration names them.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

from openlineage.client.naming.dataset import S3, Kafka, Postgres

# Marquez accepts dataset namespaces of 1..1024 characters of this set and rewrites anything else to "_"
_MARQUEZ_NAMESPACE = re.compile(r"^[a-zA-Z:;=/0-9_\-.@+]{1,1024}$")


class NamingError(ValueError):
    """A dataset address cannot be turned into an OpenLineage identity."""


def kafka(bootstrap_servers: str, topic: str) -> tuple[str, str]:
    """``kafka://host:port`` of the first bootstrap server (the spec's choice), and the topic.

    ``b1:9092,b2:9092`` and ``PLAINTEXT://b1:9092`` name the same cluster as ``b1:9092``.
    """
    first = bootstrap_servers.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise NamingError(f"bootstrap server {first!r} is not host:port")
    naming = Kafka(bootstrap_server_host=host, port=port, topic=topic)
    return _checked(naming.get_namespace()), naming.get_name()


def s3(uri: str) -> tuple[str, str]:
    """``s3://bucket`` and the key (no leading or trailing ``/``) of an s3/s3a/s3n URI."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a", "s3n") or not parsed.netloc:
        raise NamingError(f"{uri!r} is not an s3:// (or s3a://, s3n://) URI")
    key = parsed.path.strip("/")
    if not key:
        raise NamingError(f"{uri!r} names a bucket, not an object or prefix")
    naming = S3(bucket_name=parsed.netloc, object_key=key)
    return _checked(naming.get_namespace()), naming.get_name()


def iceberg_table(location: str) -> tuple[str, str]:
    """An Iceberg table by its physical location, as the OpenLineage Spark integration reports it.

    ``s3a://warehouse/default/orders/`` -> (``s3://warehouse``, ``default/orders``).
    """
    return s3(location)


def postgres(host: str, port: int, database: str, schema: str, table: str) -> tuple[str, str]:
    naming = Postgres(host=host, port=str(port), database=database, schema=schema, table=table)
    return _checked(naming.get_namespace()), naming.get_name()


def _checked(namespace: str) -> str:
    if not _MARQUEZ_NAMESPACE.match(namespace):
        raise NamingError(
            f"namespace {namespace!r} has characters Marquez rewrites to '_' (it would become another dataset)"
        )
    return namespace


_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"}
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def physical_key(namespace: str, name: str) -> tuple[str, str]:
    """What an identity points at, with the differences that do not change the data removed (loopback host
    spellings, s3a/s3n for s3, case of scheme and host, slashes at the ends of the name). Two identities with the
    same physical key are one dataset named twice: the drift that splits a lineage graph."""
    parsed = urlparse(namespace if "://" in namespace else f"{namespace}://")
    scheme = _SCHEME_ALIASES.get(parsed.scheme.lower(), parsed.scheme.lower())
    host = (parsed.hostname or "").lower()
    host = "127.0.0.1" if host in _LOOPBACK else host
    port = f":{parsed.port}" if parsed.port else ""
    return f"{scheme}://{host}{port}{parsed.path.rstrip('/')}", name.strip("/")
