"""The Dagster resource of a Kafka Connect cluster, by its REST URL, with the endpoints its workers reach, which the
connector configurations name (built from the settings by resources.build_resources)."""

from __future__ import annotations

import dagster as dg

from lineage_assets.connect.client import ConnectClient


class ConnectResource(dg.ConfigurableResource):
    url: str
    #: the workers' config.storage.topic: where Connect records each connector's creation and deletion, which tells
    #: a connector deleted and created again under the same name from the one before
    config_topic: str = "_connect-configs"
    # The endpoints as the Connect workers see them, which deploying a connector needs (the connector configurations'
    # @{placeholders}, see connect/configs.py; empty: not given, rendering a configuration that uses it fails).
    # Secrets are not here: the configurations reference them as ${env:NAME} of the workers.
    #: Kafka's bootstrap servers
    kafka_bootstrap: str = ""
    #: the schema registry's Confluent-compatible API root (an Apicurio registry's .../apis/ccompat/v7)
    schema_registry_url: str = ""
    #: the registry's basic-auth user name; empty: no authentication
    schema_registry_user: str = ""
    #: the source database's server, which Debezium captures
    source_db_host: str = ""
    source_db_port: int = 0
    #: the object store the archive sink writes to, and the archive's bucket
    s3_endpoint: str = ""
    s3_region: str = ""
    archive_bucket: str = ""
    #: seconds the archive sink holds fewer than flush.size records before it writes them (rotate.interval.ms)
    archive_rotate_s: int = 60

    def client(self) -> ConnectClient:
        return ConnectClient(self.url)
