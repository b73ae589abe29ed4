"""The Dagster resource of a Kafka cluster and its schema registry: what the assets, sensors and checks that read or
write topics get (built from the settings by resources.build_resources)."""

from __future__ import annotations

import dagster as dg

from infra.settings import KAFKA_SECURITY_FIELDS
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.registry import Registry


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
