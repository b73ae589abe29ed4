"""Iceberg REST catalog shared by Spark, Flink and pyiceberg.

Iceberg's own REST server (the fixture behind the apache/iceberg-rest-fixture image) fronts a JDBC catalog whose
tables live in PostgreSQL; data files go to the object store through S3FileIO. Spark, Flink and pyiceberg all see
a REST catalog (the OpenLineage Spark integration drops Iceberg datasets of JDBC catalogs, so none of them may
talk to the JDBC catalog directly). The fixture binds every interface, so a small launcher
(infra/jvm/.../LoopbackRESTCatalogServer.java, compiled on first start) binds it to the stack's host instead.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from infra.artifacts import classpath
from infra.services.base import Launch, Service, http_ok, java_launch

BUNDLE = "iceberg-rest-catalog"
LAUNCHER_SRC = Path(__file__).resolve().parent.parent / "jvm" / "org/apache/iceberg/rest/LoopbackRESTCatalogServer.java"
LAUNCHER_CLASS = "org.apache.iceberg.rest.LoopbackRESTCatalogServer"


class IcebergCatalog(Service):
    name = "iceberg-catalog"
    bundles = (BUNDLE,)
    startup_timeout = 90.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.iceberg_catalog_port,)

    @property
    def _classes(self) -> Path:
        return self.conf_path / "classes"

    def prepare(self) -> None:
        compiled = self._classes / "org/apache/iceberg/rest/LoopbackRESTCatalogServer.class"
        if compiled.exists() and compiled.stat().st_mtime >= LAUNCHER_SRC.stat().st_mtime:
            return
        javac = shutil.which("javac")
        if not javac:
            raise self.fail("javac (a JDK) is needed to compile the catalog launcher: run scripts/bootstrap.sh")
        self._classes.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [javac, "-d", str(self._classes), "-cp", classpath(self.settings.jars_dir, BUNDLE), str(LAUNCHER_SRC)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise self.fail(f"compiling {LAUNCHER_SRC.name} failed:\n{result.stderr}")

    def launch(self) -> Launch:
        s = self.settings
        # The fixture reads CATALOG_* variables: strip the prefix, "__" -> "-", "_" -> ".", lower-case.
        env = {
            "CATALOG_CATALOG_NAME": "lineage_lab",
            "CATALOG_URI": s.jdbc_url("iceberg_catalog"),
            "CATALOG_JDBC_USER": "iceberg",
            "CATALOG_JDBC_PASSWORD": s.catalog_db_password,
            "CATALOG_JDBC_SCHEMA__VERSION": "V1",
            "CATALOG_WAREHOUSE": s.warehouse_uri,
            "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
            "CATALOG_S3_ENDPOINT": s.s3_endpoint,
            "CATALOG_S3_PATH__STYLE__ACCESS": "true",
            "CATALOG_S3_ACCESS__KEY__ID": s.s3_access_key,
            "CATALOG_S3_SECRET__ACCESS__KEY": s.s3_secret_key,
            "CATALOG_CLIENT_REGION": s.s3_region,
            "CATALOG_REST_PORT": str(s.iceberg_catalog_port),
            "REST_HOST": s.listen_host,
            **s.aws_sdk_env(),
        }
        cp = f"{self._classes}:{classpath(s.jars_dir, BUNDLE)}"
        # the fixture logs its whole configuration (credentials included) at INFO: keep that logger at WARN
        props = {"org.slf4j.simpleLogger.log.org.apache.iceberg.rest.RESTCatalogServer": "warn"}
        return Launch(java_launch(LAUNCHER_CLASS, cp, s.iceberg_catalog_heap_mb, props=props), env=env)

    def is_healthy(self) -> bool:
        return http_ok(f"{self.settings.iceberg_catalog_url}/v1/config")


CATALOG_NAME = "lakehouse"
#: pyiceberg's REST catalog with timeouts (infra/iceberg_rest.py), named here so that the stack's CLI does not import
#: pyiceberg; its limits in seconds, as catalog properties
TIMED_CATALOG_IMPL = "infra.iceberg_rest.TimedRestCatalog"
CONNECT_TIMEOUT = "rest.connect-timeout"
READ_TIMEOUT = "rest.read-timeout"
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_READ_TIMEOUT_S = 30.0


def pyiceberg_properties_for(
    uri: str,
    s3_endpoint: str,
    access_key: str,
    secret_key: str,
    region: str,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
) -> dict:
    """Properties for ``pyiceberg.catalog.load_catalog`` against a REST catalog whose files are in an
    S3-compatible store; every call to either has a connect and a read timeout (``infra.iceberg_rest``)."""
    return {
        "py-catalog-impl": TIMED_CATALOG_IMPL,
        CONNECT_TIMEOUT: str(connect_timeout_s),
        READ_TIMEOUT: str(read_timeout_s),
        "s3.connect-timeout": str(connect_timeout_s),
        "s3.request-timeout": str(read_timeout_s),
        "uri": uri,
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": access_key,
        "s3.secret-access-key": secret_key,
        "s3.region": region,
        "s3.path-style-access": "true",
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
    }


def catalog_credentials(token: str, credential: str) -> dict[str, str]:
    """Iceberg's REST-catalog auth properties (the same keys in pyiceberg, Flink and Spark): a bearer ``token``,
    or OAuth2 client credentials ``credential`` exchanged at the catalog's token endpoint."""
    return {k: v for k, v in (("token", token), ("credential", credential)) if v}


def pyiceberg_properties(settings) -> dict[str, str]:
    s = settings
    props = pyiceberg_properties_for(
        s.iceberg_catalog_url,
        s.s3_endpoint,
        s.s3_access_key,
        s.s3_secret_key,
        s.s3_region,
        s.store_connect_timeout_s,
        s.store_read_timeout_s,
    )
    props.update(catalog_credentials(s.iceberg_catalog_token, s.iceberg_catalog_credential))
    return props


def load_catalog(settings):
    """The stack's Iceberg catalog as pyiceberg sees it."""
    from pyiceberg.catalog import load_catalog as _load

    return _load(CATALOG_NAME, **pyiceberg_properties(settings))
