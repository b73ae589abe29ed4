"""An exclusive lock between processes of this host, on a file: for work that must not run twice at once (one
hop's reconciliation, one Flink job's deployment)."""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held(path: Path, timeout: float | None = None, busy: Callable[[], Exception] | None = None) -> Iterator[None]:
    """Hold ``path``'s lock for the block. ``timeout``: after that many seconds of another holder, raise ``busy()``
    (a ``TimeoutError`` naming the file without it) instead of waiting on; None waits as long as it takes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        if timeout is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise (busy() if busy else TimeoutError(f"{path} held by another process")) from None
                    time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
