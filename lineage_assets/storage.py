"""The Dagster resources of where the pipeline's data rests: the object store (the Connect sink's archive) and the
Iceberg catalog whose tables keep their files in it. No technology folder owns them: Connect writes the archive,
Flink and Spark write Iceberg, the checks and the conservation ledger read both; so they sit below all of them
(built from the settings by resources.build_resources)."""

from __future__ import annotations

import dagster as dg

from infra.services.iceberg_catalog import (
    CATALOG_NAME,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    catalog_credentials,
    pyiceberg_properties_for,
)
from infra.services.object_store import s3_client_for


class ObjectStoreResource(dg.ConfigurableResource):
    endpoint: str
    access_key_id: str
    secret_access_key: str
    region: str

    def client(self):
        return s3_client_for(self.endpoint, self.access_key_id, self.secret_access_key, self.region)


#: seconds a sensor tick waits for each answer of the catalog (at most): a tick reads one small table metadata, and a
#: tick that waits for a hung catalog must end well inside Dagster's 60 s sensor timeout with its other reports
TICK_READ_TIMEOUT_S = 10.0


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
    #: seconds to connect to the catalog or the object store, and to wait for each answer
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    def catalog(self, read_timeout_s: float | None = None):
        """The catalog; a call it cannot finish within the timeouts raises ``requests.Timeout`` (catalog) or
        ``OSError`` (object store). ``read_timeout_s``: a shorter wait for each answer (a sensor tick's: see
        ``TICK_READ_TIMEOUT_S``)."""
        from pyiceberg.catalog import load_catalog

        props = pyiceberg_properties_for(
            self.uri,
            self.s3_endpoint,
            self.access_key_id,
            self.secret_access_key,
            self.region,
            self.connect_timeout_s,
            min(self.read_timeout_s, read_timeout_s) if read_timeout_s else self.read_timeout_s,
        )
        props.update(catalog_credentials(self.token, self.credential))
        return load_catalog(CATALOG_NAME, **props)
