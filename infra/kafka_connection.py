"""How every client of this project reaches Kafka: the bootstrap servers plus the cluster's security settings.

One value carries both, so that a SASL/TLS cluster needs its settings once (environment or Dagster config) and
every client gets them: confluent-kafka in Dagster (librdkafka names), the Flink jobs and Kafka Connect (Java
client names). The embedded broker needs none of them. It lives in infra, below the app, because ``stack up``
(it validates the settings first) and the Connect worker's configuration need it as much as the app's clients do.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.settings import KafkaClientSettings, SettingsError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaConfigError(SettingsError):
    """The Kafka security settings contradict each other; the message says which variable to fix."""


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class KafkaConnection(KafkaClientSettings):
    """The settings (declared in infra.settings) with the client configurations each kind of client needs."""

    @classmethod
    def of(cls, value: KafkaConnection | str) -> KafkaConnection:
        """A plain bootstrap string is a cluster without security settings (the embedded broker)."""
        return value if isinstance(value, KafkaConnection) else cls(bootstrap=value)

    @classmethod
    def from_settings(cls, settings) -> KafkaConnection:
        return cls(settings.kafka_bootstrap, **settings.kafka_security()).validated()

    def __str__(self) -> str:
        return self.bootstrap

    @property
    def protocol(self) -> str:
        return (self.security_protocol or "PLAINTEXT").upper()

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def validated(self) -> KafkaConnection:
        """Itself, or a KafkaConfigError naming the LINEAGE_LAB_KAFKA_* setting that is wrong."""
        if not self.bootstrap.strip():
            raise KafkaConfigError("no Kafka bootstrap servers: set LINEAGE_LAB_EXTERNAL_KAFKA=host:port")
        if self.protocol not in PROTOCOLS:
            raise KafkaConfigError(
                f"LINEAGE_LAB_KAFKA_SECURITY_PROTOCOL={self.security_protocol!r} is not one of {', '.join(PROTOCOLS)}"
            )
        mechanism = self.sasl_mechanism.upper()
        if self.uses_sasl:
            if mechanism not in SASL_LOGIN_MODULES:
                raise KafkaConfigError(
                    f"LINEAGE_LAB_KAFKA_SASL_MECHANISM={self.sasl_mechanism!r}: {self.protocol} needs one of "
                    f"{', '.join(SASL_LOGIN_MODULES)}"
                )
            if not self.sasl_username or not self.sasl_password:
                raise KafkaConfigError(
                    f"{self.protocol} needs LINEAGE_LAB_KAFKA_SASL_USERNAME and LINEAGE_LAB_KAFKA_SASL_PASSWORD"
                )
        elif mechanism or self.sasl_username:
            raise KafkaConfigError(
                f"SASL credentials are set but LINEAGE_LAB_KAFKA_SECURITY_PROTOCOL is {self.protocol}: set it to "
                "SASL_SSL or SASL_PLAINTEXT, or unset the LINEAGE_LAB_KAFKA_SASL_* variables"
            )
        if self.ssl_ca_location and not self.protocol.endswith("SSL"):
            raise KafkaConfigError(
                f"LINEAGE_LAB_KAFKA_SSL_CA_LOCATION is set but the protocol is {self.protocol}: use SSL or SASL_SSL"
            )
        return self

    def client_config(self, **extra: object) -> dict[str, object]:
        """librdkafka configuration (confluent-kafka Producer, Consumer, AdminClient) plus ``extra``."""
        config: dict[str, object] = {"bootstrap.servers": self.bootstrap}
        if self.security_protocol:
            config["security.protocol"] = self.protocol
        if self.uses_sasl:
            config["sasl.mechanism"] = self.sasl_mechanism.upper()
            config["sasl.username"] = self.sasl_username
            config["sasl.password"] = self.sasl_password
        if self.ssl_ca_location:
            config["ssl.ca.location"] = self.ssl_ca_location
        config.update(extra)
        return config

    def java_properties(self) -> dict[str, str]:
        """The same settings as Java Kafka client properties (Flink's Kafka connector, Kafka Connect), without
        ``bootstrap.servers``."""
        props: dict[str, str] = {}
        if self.security_protocol:
            props["security.protocol"] = self.protocol
        if self.uses_sasl:
            mechanism = self.sasl_mechanism.upper()
            props["sasl.mechanism"] = mechanism
            props["sasl.jaas.config"] = (
                f"{SASL_LOGIN_MODULES[mechanism]} required username={_jaas_quote(self.sasl_username)} "
                f"password={_jaas_quote(self.sasl_password)};"
            )
        if self.ssl_ca_location:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = self.ssl_ca_location
        return props

    def job_args(self) -> list[str]:
        """Arguments of the Flink jobs: ``--bootstrap`` and one ``--kafka-property key=value`` per setting."""
        args = ["--bootstrap", self.bootstrap]
        for key, value in self.java_properties().items():
            args += ["--kafka-property", f"{key}={value}"]
        return args
