"""The supervisor against tiny real processes (a Python HTTP server stands in for a JVM service)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra import supervisor
from infra.services.base import Launch, Service, ServiceError
from infra.settings import StackSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpService(Service):
    name = "toy-http"
    startup_timeout = 20.0
    stop_timeout = 5.0

    def __init__(self, settings: StackSettings, port: int, argv: list[str] | None = None) -> None:
        super().__init__(settings)
        self.port = port
        self.argv = argv

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.port,)

    def launch(self) -> Launch:
        argv = self.argv or [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1"]
        return Launch(argv)


@pytest.fixture
def home(tmp_path) -> StackSettings:
    return StackSettings(home=tmp_path)


def test_up_is_idempotent_and_down_stops_it(home):
    svc = HttpService(home, free_port())
    supervisor.up([svc], log=lambda _: None)
    pid = supervisor.read_pid(svc)
    assert pid and svc.is_healthy()
    assert supervisor.start(svc, log=lambda _: None).startswith("already running")
    assert supervisor.read_pid(svc) == pid, "a second up must not start a second process"
    supervisor.down([svc], log=lambda _: None)
    assert not svc.is_healthy()
    assert supervisor.read_pid(svc) is None
    assert [r.state for r in supervisor.status([svc])] == ["stopped"]


def test_port_taken_by_a_foreign_process_names_service_port_and_log(home):
    port = free_port()
    foreign = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"])
    try:
        svc = HttpService(home, port)
        deadline = time.monotonic() + 10
        while not svc.is_healthy() and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(ServiceError, match=rf"toy-http: port\(s\) \[{port}\].*already in use.*log: "):
            supervisor.up([svc], log=lambda _: None)
        supervisor.down([svc], log=lambda _: None)
        assert foreign.poll() is None, "down must never stop a process lineage-lab did not start"
        assert svc.is_healthy()
    finally:
        foreign.terminate()
        foreign.wait()


def test_a_process_that_dies_reports_its_log_tail(home):
    svc = HttpService(home, free_port(), argv=[sys.executable, "-c", "print('config is broken: missing key x')"])
    with pytest.raises(ServiceError, match=r"exited before it became healthy(.|\n)*config is broken"):
        supervisor.up([svc], log=lambda _: None)


def test_stale_pid_file_is_not_trusted(home):
    svc = HttpService(home, free_port())
    svc.pid_path.parent.mkdir(parents=True)
    # pid 1 exists but has another start time: must not be taken for our service, nor signalled
    svc.pid_path.write_text('{"pid": 1, "start_time": "0"}')
    assert supervisor.read_pid(svc) is None
    assert supervisor.stop(svc) == "not running"


@pytest.mark.parametrize(
    ("endpoint", "address"),
    [
        ("broker-1:9093,broker-2:9093", ("broker-1", 9093)),
        ("https://marquez.prod", ("marquez.prod", 443)),
        ("http://registry:8081/apis/ccompat/v7", ("registry", 8081)),
        ("not a url", None),
        ("http://host:port", None),
    ],
)
def test_external_endpoints_are_probed_at_their_first_address(endpoint, address):
    assert supervisor.endpoint_address(endpoint) == address


DYING = """
import ctypes, os, socket, threading, time
def hold():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", {port})); s.listen()
    time.sleep(2.0)  # the port stays bound after the leader thread died, as a killed JVM's threads do
    os._exit(0)
threading.Thread(target=hold).start()
time.sleep(0.5)
ctypes.CDLL(None).pthread_exit(None)  # the leader dies first: the process is listed as a zombie
"""


def test_start_waits_for_the_ports_of_its_own_process_still_exiting(home):
    port = free_port()
    dying = HttpService(home, port, argv=[sys.executable, "-c", DYING.format(port=port)])
    supervisor.start(dying, log=lambda _: None)
    deadline = time.monotonic() + 10
    while supervisor.read_pid(dying) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert supervisor.read_pid(dying) is None and dying.is_healthy(), "leader dead, port still held"
    again = HttpService(home, port)
    try:
        assert supervisor.start(again, log=lambda _: None).startswith("healthy after")
    finally:
        supervisor.stop(again)


IGNORES_TERM = """
import signal, socket, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a process that will not stop: only SIGKILL ends it
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", {port})); s.listen()
time.sleep(60)
"""


def test_a_service_started_by_a_caller_that_ignores_sigterm_still_stops_gracefully(home):
    svc = HttpService(home, free_port())
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as nohup, a shell's background job or a test runner
    try:
        supervisor.start(svc, log=lambda _: None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        status = Path(f"/proc/{supervisor.read_pid(svc)}/status").read_text()
        ignored = int(status.split("SigIgn:")[1].split()[0], 16)
        assert ignored & (1 << (signal.SIGTERM - 1)) == 0, "the service inherited an ignored SIGTERM"
    finally:
        assert supervisor.stop(svc) == "stopped"  # not "killed after 5s"


def test_stop_returns_once_a_killed_process_let_go_of_its_ports(home):
    port = free_port()
    stubborn = HttpService(home, port, argv=[sys.executable, "-c", IGNORES_TERM.format(port=port)])
    supervisor.start(stubborn, log=lambda _: None)
    assert supervisor.stop(stubborn) == "killed after 5s"
    again = HttpService(home, port)
    try:
        assert supervisor.start(again, log=lambda _: None).startswith("healthy after")
    finally:
        supervisor.stop(again)
