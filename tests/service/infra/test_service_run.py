"""`lineage-lab service run NAME`, a container's main process, with a real service (the object store, the quickest
to start) in a private state dir on a free port: healthy only once provisioned, listening where ``bind_host``
says, and stopped with its whole process group by the signal Docker sends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.services.base import port_open
from infra.services.object_store import s3_client
from infra.settings import StackSettings

CLI = str(Path(sys.executable).with_name("lineage-lab"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listens_on_every_interface(port: int) -> bool:
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    return any(line.split()[3] in (f"0.0.0.0:{port}", f"*:{port}") for line in out.splitlines())


@pytest.fixture
def container_env(tmp_path) -> dict[str, str]:
    return {
        **os.environ,
        "LINEAGE_LAB_HOME": str(tmp_path),
        "LINEAGE_LAB_OBJECT_STORE_PORT": str(free_port()),
        "LINEAGE_LAB_BIND_HOST": "0.0.0.0",
        "LINEAGE_LAB_EXTERNAL_OBJECT_STORE": "",
    }


def health(env: dict[str, str]) -> int:
    return subprocess.run([CLI, "service", "health", "object-store"], env=env, capture_output=True).returncode


def test_a_service_runs_in_the_foreground_until_docker_stops_it(container_env, tmp_path):
    settings = StackSettings.from_env(container_env)
    port = settings.object_store_port
    assert health(container_env) == 1, "healthy before it was started"
    output = tmp_path / "container.log"
    with output.open("wb") as out:
        proc = subprocess.Popen([CLI, "service", "run", "object-store"], env=container_env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 90
        while health(container_env) != 0:
            assert proc.poll() is None, output.read_text()
            assert time.monotonic() < deadline, "not healthy within 90 s"
            time.sleep(1)
        # provisioned before it says healthy: the buckets the stack expects exist
        names = {b["Name"] for b in s3_client(settings).list_buckets()["Buckets"]}
        assert {settings.warehouse_bucket, settings.archive_bucket} <= names
        assert listens_on_every_interface(port), "bind_host 0.0.0.0 was not used"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 128 + signal.SIGTERM
    assert not port_open("127.0.0.1", port), "the service outlived its container's main process"
    assert health(container_env) == 1
