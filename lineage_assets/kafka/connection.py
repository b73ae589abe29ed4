"""The app's name for the Kafka connection. It is declared in infra (infra/kafka_connection.py), where ``stack up``
and the Connect worker need it too; the app's clients import it from here."""

from infra.kafka_connection import PROTOCOLS, SASL_LOGIN_MODULES, KafkaConfigError, KafkaConnection

__all__ = ["PROTOCOLS", "SASL_LOGIN_MODULES", "KafkaConfigError", "KafkaConnection"]
