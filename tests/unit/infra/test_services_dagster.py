"""The Dagster instance the stack writes: sensors evaluated in threads, Dagster's own sensor timeout (a tick only
observes: the checks run in runs), and the check runs the sensors ask for one at a time, in both deployments."""

from pathlib import Path

import dagster as dg
import yaml

from infra.services.dagster import DagsterDev, instance_config
from infra.settings import StackSettings

#: the check runs' tag and limit, written out by hand
ONE_CHECK_RUN_AT_A_TIME = [{"key": "lineage-lab/checks-requested-by", "limit": 1}]


def test_the_instance_evaluates_sensors_in_four_threads():
    config = yaml.safe_load(instance_config(3))
    assert config["sensors"] == {"use_threads": True, "num_workers": 4}


def test_the_instance_runs_one_sensor_requested_check_run_at_a_time():
    runs = yaml.safe_load(instance_config(3))["concurrency"]["runs"]
    assert runs == {"max_concurrent_runs": 3, "tag_concurrency_limits": ONE_CHECK_RUN_AT_A_TIME}


#: run monitoring as both instances configure it, written out by hand: a run that never starts, or is stuck
#: cancelling, is failed after 3 minutes; nothing is resumed
RUN_MONITORING = {
    "enabled": True,
    "start_timeout_seconds": 180,
    "cancel_timeout_seconds": 180,
    "max_resume_run_attempts": 0,
    "poll_interval_seconds": 30,
    "free_slots_after_run_end_seconds": 180,
}


def test_the_instance_fails_a_run_that_never_starts():
    assert yaml.safe_load(instance_config(3))["run_monitoring"] == RUN_MONITORING


#: the daemon's queue, as both instances configure it, written out by hand: looked at every second (Dagster's
#: default is 5 s)
RUN_COORDINATOR = {
    "module": "dagster._core.run_coordinator",
    "class": "QueuedRunCoordinator",
    "config": {"dequeue_interval_seconds": 1},
}


def test_the_instance_launches_queued_runs_every_second(tmp_path: Path):
    text = instance_config(3)
    assert yaml.safe_load(text)["run_coordinator"] == RUN_COORDINATOR
    (tmp_path / "dagster.yaml").write_text(text)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:  # Dagster takes it beside `concurrency`
        assert instance.run_coordinator.dequeue_interval_seconds == 1
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 3


def test_dagster_dev_keeps_dagsters_own_sensor_timeout(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS", raising=False)
    launch = DagsterDev(StackSettings(home=tmp_path)).launch()
    assert "DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS" not in launch.env
    assert launch.env["DAGSTER_HOME"] == str(tmp_path / "data" / "dagster")


def test_the_compose_instance_matches():
    root = Path(__file__).resolve().parents[3] / "infra" / "compose"
    config = yaml.safe_load((root / "dagster" / "dagster.yaml").read_text())
    assert config["sensors"] == {"use_threads": True, "num_workers": 4}
    assert config["concurrency"]["runs"]["tag_concurrency_limits"] == ONE_CHECK_RUN_AT_A_TIME
    assert config["run_monitoring"] == RUN_MONITORING
    assert config["run_coordinator"] == RUN_COORDINATOR
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    assert "DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS" not in compose["x-endpoints"]
