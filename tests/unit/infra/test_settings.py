from pathlib import Path

import pytest

from infra.settings import SettingsError, StackSettings


def test_defaults_bind_loopback_and_distinct_ports():
    s = StackSettings()
    ports = [getattr(s, f) for f in vars(s) if f.endswith("_port")]
    assert s.host == "127.0.0.1"
    assert len(ports) == len(set(ports)), "two services would share a port"


def test_environment_overrides_ports_and_home(tmp_path: Path):
    s = StackSettings.from_env({"LINEAGE_LAB_KAFKA_PORT": "19092", "LINEAGE_LAB_HOME": str(tmp_path)})
    assert s.kafka_bootstrap == "127.0.0.1:19092"
    assert s.home == tmp_path.resolve()
    assert s.logs_dir == tmp_path.resolve() / "logs"


def test_malformed_port_names_the_variable():
    with pytest.raises(SettingsError, match="LINEAGE_LAB_KAFKA_PORT='ninety'"):
        StackSettings.from_env({"LINEAGE_LAB_KAFKA_PORT": "ninety"})


def test_endpoints_follow_ports():
    s = StackSettings.from_env({"LINEAGE_LAB_SCHEMA_REGISTRY_PORT": "18085", "LINEAGE_LAB_HOST": "10.0.0.5"})
    assert s.schema_registry_url == "http://10.0.0.5:18085/apis/ccompat/v7"
    assert s.jdbc_url("marquez") == "jdbc:postgresql://10.0.0.5:15432/marquez"


def test_settings_travel_to_child_processes_as_environment():
    import dataclasses

    custom = dataclasses.replace(StackSettings(), home=Path("/tmp/elsewhere"), marquez_port=15000)
    assert StackSettings.from_env(custom.as_env()) == custom


def test_external_endpoints_replace_the_embedded_ones_and_are_listed():
    s = StackSettings.from_env(
        {
            "LINEAGE_LAB_EXTERNAL_KAFKA": "broker-1.prod:9093,broker-2.prod:9093",
            "LINEAGE_LAB_EXTERNAL_MARQUEZ": "https://marquez.prod/",
            "LINEAGE_LAB_EXTERNAL_FLINK": "http://jobmanager.prod:8081",
        }
    )
    assert s.kafka_bootstrap == "broker-1.prod:9093,broker-2.prod:9093"
    assert s.marquez_url == "https://marquez.prod"
    assert s.flink_rest_url == "http://jobmanager.prod:8081"
    assert s.schema_registry_url == "http://127.0.0.1:8085/apis/ccompat/v7", "the others stay embedded"
    assert s.external() == {
        "kafka": "broker-1.prod:9093,broker-2.prod:9093",
        "flink-jobmanager": "http://jobmanager.prod:8081",
        "flink-taskmanager": "http://jobmanager.prod:8081",
        "marquez": "https://marquez.prod/",
        "marquez-web": "(none: Marquez is external)",
    }
    assert StackSettings().external() == {}


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("LINEAGE_LAB_EXTERNAL_MARQUEZ", "marquez:5000", "not an http"),
        ("LINEAGE_LAB_EXTERNAL_FLINK", "http://jobmanager:rest", "not an http"),
        ("LINEAGE_LAB_EXTERNAL_KAFKA", "broker-1:9093,broker-2", "'broker-2' is not host:port"),
    ],
)
def test_an_unusable_external_endpoint_names_the_variable(variable, value, says):
    with pytest.raises(SettingsError, match=f"{variable}=.*{says}"):
        StackSettings.from_env({variable: value})


def test_the_kafka_security_settings_by_their_client_names():
    from infra.settings import KAFKA_SECRET_FIELDS, KAFKA_SECURITY_FIELDS

    settings = StackSettings.from_env(
        {"LINEAGE_LAB_KAFKA_SASL_MECHANISM": "PLAIN", "LINEAGE_LAB_KAFKA_SASL_USERNAME": "u"}
    )
    assert KAFKA_SECURITY_FIELDS == (
        "security_protocol",
        "sasl_mechanism",
        "sasl_username",
        "sasl_password",
        "ssl_ca_location",
    )
    assert KAFKA_SECRET_FIELDS == ("sasl_username", "sasl_password")
    assert settings.kafka_security() == {
        "security_protocol": "",
        "sasl_mechanism": "PLAIN",
        "sasl_username": "u",
        "sasl_password": "",
        "ssl_ca_location": "",
    }


def test_a_freshness_budget_at_or_past_the_pending_warning_is_refused_naming_both():
    with pytest.raises(SettingsError, match="SUPPLIER_STATS_FRESHNESS_S=600 must be at least 0 and less than"):
        StackSettings.from_env({"LINEAGE_LAB_SUPPLIER_STATS_FRESHNESS_S": "600"})
    with pytest.raises(SettingsError, match="SUPPLIER_STATS_FRESHNESS_S=-1"):
        StackSettings.from_env({"LINEAGE_LAB_SUPPLIER_STATS_FRESHNESS_S": "-1"})
    assert StackSettings.from_env({"LINEAGE_LAB_SUPPLIER_STATS_FRESHNESS_S": "0"}).supplier_stats_freshness_s == 0
    assert StackSettings.from_env({}).supplier_stats_freshness_s == 120


def test_a_sensor_interval_below_one_second_is_refused_naming_the_variable():
    with pytest.raises(SettingsError, match="SENSOR_INTERVAL_S=0: the seconds between two sensor ticks must be"):
        StackSettings.from_env({"LINEAGE_LAB_SENSOR_INTERVAL_S": "0"})
    assert StackSettings.from_env({"LINEAGE_LAB_SENSOR_INTERVAL_S": "15"}).sensor_interval_s == 15


def test_a_streaming_freshness_window_under_two_minutes_is_refused_naming_the_variable():
    """Dagster would refuse the half-window warning with an invariant error that names no setting."""
    with pytest.raises(SettingsError, match="STREAMING_FRESH_MINUTES=1: a streaming output's freshness window must"):
        StackSettings.from_env({"LINEAGE_LAB_STREAMING_FRESH_MINUTES": "1"})
    assert StackSettings.from_env({"LINEAGE_LAB_STREAMING_FRESH_MINUTES": "2"}).streaming_fresh_minutes == 2


def test_checks_every_minutes_must_divide_an_hour_naming_the_variable():
    for bad in ("0", "7", "90", "-5"):
        with pytest.raises(SettingsError, match=f"CHECKS_EVERY_MINUTES={bad}: the minutes between two scheduled"):
            StackSettings.from_env({"LINEAGE_LAB_CHECKS_EVERY_MINUTES": bad})
    assert StackSettings.from_env({"LINEAGE_LAB_CHECKS_EVERY_MINUTES": "30"}).checks_every_minutes == 30
    assert StackSettings.from_env({}).checks_every_minutes == 5


def test_an_archive_rotation_below_one_second_is_refused_naming_the_variable():
    with pytest.raises(SettingsError, match="ARCHIVE_ROTATE_S=0: the seconds the archive sink holds records"):
        StackSettings.from_env({"LINEAGE_LAB_ARCHIVE_ROTATE_S": "0"})
    assert StackSettings.from_env({}).archive_rotate_s == 60
