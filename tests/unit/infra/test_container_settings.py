"""What a service renders when it runs in a container of its own: it listens on ``bind_host`` but advertises its
container's name (``host``), and reaches the others by the endpoints the deployment names."""

from __future__ import annotations

import pytest
import yaml

from infra.services.flink import flink_config_text, stack_layout
from infra.services.kafka import Kafka
from infra.services.kafka_connect import KafkaConnect
from infra.settings import SettingsError, StackSettings

#: the environment every container of the Compose deployment shares, plus the container's own name
COMPOSE = {
    "LINEAGE_LAB_BIND_HOST": "0.0.0.0",
    "LINEAGE_LAB_EXTERNAL_POSTGRES": "postgres:15432",
    "LINEAGE_LAB_EXTERNAL_KAFKA": "kafka:9092",
    "LINEAGE_LAB_EXTERNAL_FLINK": "http://flink-jobmanager:8081",
    "LINEAGE_LAB_EXTERNAL_DAGSTER": "http://dagster-webserver:3000",
}


def settings_of(container: str, tmp_path) -> StackSettings:
    return StackSettings.from_env({**COMPOSE, "LINEAGE_LAB_HOST": container, "LINEAGE_LAB_HOME": str(tmp_path)})


def properties(path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_without_a_bind_host_services_listen_where_they_are_reached():
    s = StackSettings()
    assert s.listen_host == "127.0.0.1"
    assert s.postgres_address == ("127.0.0.1", 15432)
    assert s.dagster_url == "http://127.0.0.1:3000"


def test_the_database_and_dagster_follow_their_external_endpoints(tmp_path):
    s = settings_of("dagster-daemon", tmp_path)
    assert s.postgres_address == ("postgres", 15432)
    assert s.jdbc_url("marquez") == "jdbc:postgresql://postgres:15432/marquez"
    assert s.postgres_dsn("orders_source", "orders", "pw") == "postgresql://orders:pw@postgres:15432/orders_source"
    assert s.dagster_url == "http://dagster-webserver:3000"
    assert {"postgres", "dagster"} <= set(s.external())


@pytest.mark.parametrize("value", ["postgres", "postgres:port", "a:1,b:2"])
def test_an_unusable_database_endpoint_is_refused_with_its_variable(value):
    with pytest.raises(SettingsError, match="LINEAGE_LAB_EXTERNAL_POSTGRES"):
        StackSettings.from_env({"LINEAGE_LAB_EXTERNAL_POSTGRES": value})


def test_kafka_listens_on_every_interface_and_advertises_its_name(tmp_path):
    kafka = Kafka(settings_of("kafka", tmp_path))
    kafka.data_path.mkdir(parents=True)
    (kafka.data_path / "meta.properties").write_text("")  # formatted already: only the config is rendered
    kafka.prepare()
    props = properties(kafka.properties)
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://kafka:9092,CONTROLLER://kafka:9093"
    assert props["controller.quorum.bootstrap.servers"] == "kafka:9093"


def test_connect_advertises_its_name_for_its_rest_forwarding(tmp_path, monkeypatch):
    monkeypatch.setattr("infra.services.kafka_connect.plugin_bundles", lambda: [])
    connect = KafkaConnect(settings_of("kafka-connect", tmp_path))
    connect.prepare()
    props = properties(connect.conf_path / "connect-distributed.properties")
    assert props["listeners"] == "http://0.0.0.0:8083"
    assert props["rest.advertised.host.name"] == "kafka-connect"
    assert props["bootstrap.servers"] == "kafka:9092"


def test_a_taskmanager_of_its_own_finds_the_jobmanager_by_the_rest_url(tmp_path):
    config = yaml.safe_load(flink_config_text(stack_layout(settings_of("flink-taskmanager", tmp_path)), ""))
    assert config["jobmanager.rpc.address"] == "flink-jobmanager"
    assert config["rest.address"] == "flink-jobmanager"
    assert config["taskmanager.host"] == "flink-taskmanager"
    assert config["taskmanager.bind-host"] == config["jobmanager.bind-host"] == "0.0.0.0"


def test_the_embedded_flink_config_binds_and_advertises_loopback(tmp_path):
    config = yaml.safe_load(flink_config_text(stack_layout(StackSettings(home=tmp_path)), ""))
    assert {config[k] for k in ("jobmanager.rpc.address", "rest.bind-address", "taskmanager.host")} == {"127.0.0.1"}
