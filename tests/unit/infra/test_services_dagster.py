"""The Dagster instance the stack writes: sensors evaluated in threads, with a tick timeout long enough for a tick
that evaluates checks (a timed-out tick loses its cursor, events and evaluations)."""

from pathlib import Path

import yaml

from infra.services.dagster import DagsterDev, instance_config
from infra.settings import StackSettings


def test_the_instance_evaluates_sensors_in_four_threads():
    config = yaml.safe_load(instance_config(3))
    assert config["sensors"] == {"use_threads": True, "num_workers": 4}


def test_dagster_dev_gives_a_sensor_tick_five_minutes(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS", raising=False)
    launch = DagsterDev(StackSettings(home=tmp_path)).launch()
    assert launch.env["DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS"] == "300"
    assert launch.env["DAGSTER_HOME"] == str(tmp_path / "data" / "dagster")


def test_a_timeout_in_the_environment_takes_precedence(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS", "900")
    assert DagsterDev(StackSettings(home=tmp_path)).launch().env["DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS"] == "900"


def test_the_compose_instance_matches():
    root = Path(__file__).resolve().parents[3] / "infra" / "compose"
    config = yaml.safe_load((root / "dagster" / "dagster.yaml").read_text())
    assert config["sensors"] == {"use_threads": True, "num_workers": 4}
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    timeout = compose["x-endpoints"]["DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS"]
    assert timeout == "${DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS:-300}"  # 300 unless the environment sets it
