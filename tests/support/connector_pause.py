"""A Kafka Connect connector paused inside a block, through Connect's REST API: while the connector and every task
report PAUSED, a sink writes nothing, so two readings of what it wrote are decided to agree. Resumed at the end, and
waited for until every task runs again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from infra.settings import StackSettings
from lineage_assets.connect.client import ConnectClient
from tests.support.engine_waits import wait_for


def states(client: ConnectClient, name: str) -> set[str]:
    """The states the connector and its tasks report now (empty: no such connector)."""
    status = client.status(name)
    return {status.state, *(t.state for t in status.tasks)} if status else set()


@contextmanager
def connector_paused(settings: StackSettings, name: str) -> Iterator[None]:
    client = ConnectClient(settings.connect_url)
    client.pause(name)
    try:
        wait_for(f"connector {name} and its tasks PAUSED", lambda: states(client, name) == {"PAUSED"})
        yield
    finally:
        client.resume(name)
        wait_for(f"connector {name} and its tasks RUNNING again", lambda: states(client, name) == {"RUNNING"})
