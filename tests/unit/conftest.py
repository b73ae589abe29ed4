"""Fixtures of the unit tests."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator

import pytest

#: a client that ignores its timeout must fail the test, not hang the suite: far above the timeouts tests set
HUNG_GUARD_S = 60


@pytest.fixture
def hung_url() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a store that accepts connections and never answers: a listening socket that
    never accepts (the kernel completes the handshake and buffers the request), which is what a client of a stopped
    (SIGSTOP) or wedged server sees."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def still_waiting(*_):
        raise AssertionError(f"the client was still waiting after {HUNG_GUARD_S} s")

    previous = signal.signal(signal.SIGALRM, still_waiting)
    signal.alarm(HUNG_GUARD_S)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        server.close()


@pytest.fixture
def refused_url() -> str:
    """``http://127.0.0.1:<port>`` where nothing listens (the port was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
