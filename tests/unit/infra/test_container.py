"""A service as a container's main process: the ready marker its in-process probe keeps, and what Compose's
healthcheck (infra/compose/healthy.sh) reads from it. A toy service whose health a flag decides; a real process."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from infra import container
from infra.services.base import Launch, Service
from infra.settings import REPO_ROOT, StackSettings

HEALTHY_SH = REPO_ROOT / "infra" / "compose" / "healthy.sh"
#: a failure detector for each wait on the marker, far above the probe interval the tests set
WAIT_S = 20.0


class ToggledService(Service):
    name = "toy"
    startup_timeout = 20.0
    stop_timeout = 5.0

    def __init__(self, settings: StackSettings, stop_file: Path) -> None:
        super().__init__(settings)
        self.up = True
        self.stop_file = stop_file

    @property
    def ports(self) -> tuple[int, ...]:
        return ()

    def launch(self) -> Launch:
        # runs until the test creates stop_file
        wait = f"import os,time\nwhile not os.path.exists({str(self.stop_file)!r}): time.sleep(0.05)"
        return Launch([sys.executable, "-c", wait])

    def is_healthy(self) -> bool:
        return self.up


def compose_says_healthy(settings: StackSettings) -> bool:
    env = {"LINEAGE_LAB_HOME": str(settings.home), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["sh", str(HEALTHY_SH), "toy"], env=env).returncode == 0


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {WAIT_S} s")
        time.sleep(0.05)


@pytest.fixture
def settings(tmp_path) -> StackSettings:
    return StackSettings(home=tmp_path / "home")


def test_the_marker_follows_each_probe_and_compose_reads_it(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(container, "PROBE_INTERVAL_S", 0.2)
    svc = ToggledService(settings, tmp_path / "stop")
    marker = container.ready_marker(svc)
    seen: dict[str, object] = {}

    def observe() -> None:
        try:
            wait_for(marker.exists, "no ready marker once healthy")
            seen["healthy"] = compose_says_healthy(settings)
            seen["until"] = int(marker.read_text()) - time.time()
            svc.up = False
            wait_for(lambda: not marker.exists(), "the marker stayed after an unhealthy probe")
            seen["unhealthy"] = compose_says_healthy(settings)
            svc.up = True
            wait_for(marker.exists, "no marker again once healthy again")
            seen["again"] = compose_says_healthy(settings)
        finally:
            svc.stop_file.touch()

    watcher = threading.Thread(target=observe)
    watcher.start()
    status = container.run(svc, log=lambda _: None)
    watcher.join()
    assert status == 0
    assert seen["healthy"] is True
    # a healthy probe counts for three probe intervals: 0.6 s at most, written less than that ago
    assert 0 < seen["until"] <= 3 * 0.2 + 1
    assert seen["unhealthy"] is False
    assert seen["again"] is True
    assert not marker.exists(), "the marker must go with the service"


def test_a_marker_whose_time_has_passed_is_unhealthy(settings):
    svc = ToggledService(settings, Path("/nonexistent"))
    marker = container.ready_marker(svc)
    marker.parent.mkdir(parents=True)
    marker.write_text(f"{int(time.time()) - 1}\n")
    assert compose_says_healthy(settings) is False
    assert container.healthy(svc) is False
    marker.write_text(f"{int(time.time()) + 60}\n")
    assert compose_says_healthy(settings) is True
    assert container.healthy(svc) is True


def test_no_marker_or_a_garbled_one_is_unhealthy(settings):
    svc = ToggledService(settings, Path("/nonexistent"))
    assert compose_says_healthy(settings) is False
    assert container.healthy(svc) is False
    marker = container.ready_marker(svc)
    marker.parent.mkdir(parents=True)
    marker.write_text("12345 (an old pid)\n")
    assert container.healthy(svc) is False
