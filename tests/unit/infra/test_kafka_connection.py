"""The Kafka connection lives in infra (stack up validates it, the Connect worker renders it) and the app uses the
same class, so one set of settings reaches every client."""

import pytest

from infra.kafka_connection import KafkaConfigError, KafkaConnection
from infra.services.kafka_connect import worker_security_lines
from infra.settings import SettingsError, StackSettings
from lineage_assets.kafka import connection as app_connection


def test_the_app_uses_infras_connection():
    assert app_connection.KafkaConnection is KafkaConnection
    assert app_connection.KafkaConfigError is KafkaConfigError


def test_a_contradiction_is_a_settings_error_that_the_command_line_reports():
    with pytest.raises(SettingsError, match="LINEAGE_LAB_KAFKA_SASL_USERNAME"):
        KafkaConnection("b:9092", security_protocol="SASL_SSL", sasl_mechanism="PLAIN").validated()


def test_the_embedded_broker_needs_no_worker_security_lines():
    assert worker_security_lines(KafkaConnection.from_settings(StackSettings())) == ""
