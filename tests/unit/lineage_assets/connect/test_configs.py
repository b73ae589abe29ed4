import dataclasses

import pytest

from infra.services.kafka_connect import worker_security_lines
from infra.settings import REGISTRY_PASSWORD_ENV, StackSettings
from lineage_assets.connect.configs import ConnectorConfigError, render_connector
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.resources import build_resources


def test_an_external_apicurio_registry_gives_the_converters_its_native_api_and_credentials():
    s = dataclasses.replace(
        StackSettings(),
        external_schema_registry="https://registry.prod/apis/ccompat/v7",
        schema_registry_user_info="connect:pw-4711",
    )
    config = render_connector("orders-s3-sink", build_resources(s)["connect"])
    assert config["value.converter.apicurio.registry.url"] == "https://registry.prod/apis/registry/v2"
    assert config["value.converter.apicurio.auth.username"] == "connect"
    assert config["value.converter.apicurio.auth.password"] == f"${{env:{REGISTRY_PASSWORD_ENV}}}"
    assert "pw-4711" not in str(config), "the password must stay in the worker's environment"


def test_the_archive_sink_rotates_after_the_seconds_the_settings_give():
    assert render_connector("orders-s3-sink", build_resources(StackSettings())["connect"])["rotate.interval.ms"] == (
        "60000"
    )
    quick = StackSettings.from_env({"LINEAGE_LAB_ARCHIVE_ROTATE_S": "15"})
    assert render_connector("orders-s3-sink", build_resources(quick)["connect"])["rotate.interval.ms"] == "15000"


def test_a_registry_without_apicurio_api_is_a_clear_error():
    s = dataclasses.replace(StackSettings(), external_schema_registry="https://confluent-sr.prod:8081")
    with pytest.raises(ConnectorConfigError, match="Apicurio"):
        render_connector("orders-source", build_resources(s)["connect"])


def test_the_worker_and_its_connector_clients_get_the_security_settings():
    lines = worker_security_lines(KafkaConnection("b:9093", "SASL_SSL", "PLAIN", "u", "p\\q")).splitlines()
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert f"{prefix}security.protocol=SASL_SSL" in lines
        assert f"{prefix}sasl.mechanism=PLAIN" in lines
    jaas = next(line for line in lines if line.startswith("sasl.jaas.config="))
    # a backslash is escaped for the JAAS string and again for the properties file
    assert jaas.endswith('password="p\\\\\\\\q";')
    assert worker_security_lines(KafkaConnection("b:9092")) == ""
