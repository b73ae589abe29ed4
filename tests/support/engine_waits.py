"""Waiting for an engine's own record of an event, read here through its REST or GraphQL API or its store rather
than through the product's clients: a Flink job's completed checkpoints (their ids only grow), a Dagster sensor's
ticks (a tick that started after a moment and ended) and the lineage outbox's deliveries (an event queued before a
moment only ever leaves the queue). A test waits for one of these, then asserts once; none sleeps for an interval
and hopes the event happened."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing

import pytest
import requests

from infra.settings import StackSettings

#: generous: two sensor ticks and a deployment fit several times over
DEADLINE = 240

TICKS_QUERY = """
query ($name: String!, $after: Float!) {
  sensorOrError(sensorSelector: {repositoryLocationName: "lineage_assets", repositoryName: "__repository__",
                                 sensorName: $name}) {
    __typename
    ... on Sensor { sensorState { ticks(afterTimestamp: $after, limit: 50) { status timestamp endTimestamp } } }
  }
}"""


def running_flink_job(settings: StackSettings, name: str) -> str:
    """The id of the RUNNING Flink job named ``name`` on the stack's cluster (Flink's /jobs/overview)."""
    overview = requests.get(f"{settings.flink_rest_url}/jobs/overview", timeout=10)
    overview.raise_for_status()
    running = [j["jid"] for j in overview.json()["jobs"] if j["name"] == name and j["state"] == "RUNNING"]
    assert len(running) == 1, f"{len(running)} RUNNING Flink jobs named {name}"
    return running[0]


def latest_completed_checkpoint(settings: StackSettings, jid: str) -> dict:
    """The job's latest completed checkpoint as Flink's /jobs/<jid>/checkpoints gives it, {} before the first."""
    found = requests.get(f"{settings.flink_rest_url}/jobs/{jid}/checkpoints", timeout=10)
    found.raise_for_status()
    return (found.json().get("latest") or {}).get("completed") or {}


def completed_checkpoint(settings: StackSettings, jid: str) -> int:
    """The id of the job's latest completed checkpoint, 0 before the first."""
    return int(latest_completed_checkpoint(settings, jid).get("id") or 0)


def wait_for_checkpoints(settings: StackSettings, names: list[str], count: int = 2, timeout: float = 180.0) -> None:
    """Until each named running job has completed ``count`` checkpoints after the one it had completed when called
    (so whatever it had emitted by then is committed, for a job that commits on checkpoints)."""
    jobs = {name: running_flink_job(settings, name) for name in names}
    wanted = {name: completed_checkpoint(settings, jid) + count for name, jid in jobs.items()}
    deadline = time.monotonic() + timeout
    behind = dict(wanted)
    while behind and time.monotonic() < deadline:
        time.sleep(1)
        behind = {n: w for n, w in wanted.items() if completed_checkpoint(settings, jobs[n]) < w}
    assert not behind, f"checkpoints not completed within {timeout:.0f} s (job: checkpoint id waited for): {behind}"


def wait_for_a_checkpoint_from_now(settings: StackSettings, names: list[str], timeout: float = 180.0) -> None:
    """Until each named running job has completed a checkpoint triggered after this call (Flink's trigger time of its
    latest completed checkpoint): what the job had read by the call is committed, for a job that commits on
    checkpoints. At most one interval and the checkpoint's own time, where two more checkpoints take up to two."""
    jobs = {name: running_flink_job(settings, name) for name in names}
    called_ms = time.time() * 1000

    def triggered_ms(jid: str) -> int:
        return int(latest_completed_checkpoint(settings, jid).get("trigger_timestamp") or 0)

    deadline = time.monotonic() + timeout
    behind = list(names)
    while behind and time.monotonic() < deadline:
        time.sleep(1)
        behind = [n for n in names if triggered_ms(jobs[n]) <= called_ms]
    assert not behind, f"no checkpoint triggered after the call completed within {timeout:.0f} s: {behind}"


def ticks_since(settings: StackSettings, sensor: str, after: float) -> list[dict]:
    """The ticks of ``sensor`` that started after ``after`` (Unix time), as Dagster's GraphQL lists them."""
    response = requests.post(
        f"http://{settings.host}:{settings.dagster_port}/graphql",
        json={"query": TICKS_QUERY, "variables": {"name": sensor, "after": after}},
        timeout=60,
    )
    response.raise_for_status()
    found = response.json()["data"]["sensorOrError"]
    assert found["__typename"] == "Sensor", found
    return found["sensorState"]["ticks"]


def ended_ticks(settings: StackSettings, sensor: str, after: float) -> list[dict]:
    """The ticks of ``sensor`` that started after ``after`` (Unix time) and have ended, oldest first."""
    ticks = ticks_since(settings, sensor, after)
    return sorted((t for t in ticks if t["status"] != "STARTED" and t["endTimestamp"]), key=lambda t: t["timestamp"])


def wait_for_ticks_to_end(settings: StackSettings, sensor: str, timeout: float = 180.0) -> None:
    """For a sensor just stopped: until no tick of it that started in the last 5 minutes is still running. A stopped
    sensor starts no tick, but one that began before the stop still evaluates, and asks for its runs as it ends
    (``test_conservation_ui`` met such a run of flink_job_sensor 17 s after the stop). Older ticks are left out: a
    tick the daemon never ended (killed mid-tick) stays STARTED."""
    after = time.time() - 300
    deadline = time.monotonic() + timeout
    while True:
        running = [t for t in ticks_since(settings, sensor, after) if t["status"] == "STARTED"]
        if not running:
            return
        assert time.monotonic() < deadline, (
            f"{sensor}: a tick started at {running[0]['timestamp']:.0f} is still running"
        )
        time.sleep(1)


RECENT_TICKS_QUERY = """
query ($name: String!) {
  sensorOrError(sensorSelector: {repositoryLocationName: "lineage_assets", repositoryName: "__repository__",
                                 sensorName: $name}) {
    __typename
    ... on Sensor { sensorState { status ticks(limit: 3) { status timestamp skipReason runIds error { message } } } }
  }
}"""


def recent_ticks(settings: StackSettings, sensor: str) -> str:
    """What ``sensor``'s last three ticks did, one line each, for a failure message (never raises: the message
    matters more than this detail)."""
    try:
        response = requests.post(
            f"http://{settings.host}:{settings.dagster_port}/graphql",
            json={"query": RECENT_TICKS_QUERY, "variables": {"name": sensor}},
            timeout=30,
        )
        state = response.json()["data"]["sensorOrError"]["sensorState"]
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        return f"{sensor}: its ticks could not be read ({exc})"
    lines = [f"{sensor} ({state['status']}), its last ticks:"]
    for tick in state["ticks"]:
        said = tick["skipReason"] or (tick["error"] or {}).get("message", "").split("\n")[0] or tick["runIds"]
        lines.append(f"  {time.strftime('%H:%M:%S', time.gmtime(tick['timestamp']))} UTC {tick['status']}: {said}")
    return "\n".join(lines)


def wait_for_tick(settings: StackSettings, sensor: str, after: float, timeout: float = 180.0) -> dict:
    """The first tick of ``sensor`` that started after ``after`` and ended: everything it could see at ``after`` it
    has seen."""
    deadline = time.monotonic() + timeout
    ticks = ended_ticks(settings, sensor, after)
    while not ticks and time.monotonic() < deadline:
        time.sleep(2)
        ticks = ended_ticks(settings, sensor, after)
    assert ticks, f"no tick of {sensor} started after {after:.0f} and ended within {timeout:.0f} s: is it running?"
    return ticks[0]


def queued_before(settings: StackSettings, moment: float) -> int:
    """Events of the stack's lineage outbox queued before ``moment`` and not delivered yet (its SQLite, read here)."""
    query = "SELECT COUNT(*) FROM events WHERE state = 'queued' AND created <= ?"
    with closing(sqlite3.connect(f"file:{settings.lineage_outbox}?mode=ro", uri=True, timeout=10)) as db:
        (count,) = db.execute(query, (moment,)).fetchone()
    return count


def wait_for_delivery(settings: StackSettings, moment: float, timeout: float = 120.0) -> None:
    """Until the stack's lineage drainer has delivered (or given up on) every event queued before ``moment``: what
    Marquez says after this includes them."""
    deadline = time.monotonic() + timeout
    left = queued_before(settings, moment)
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = queued_before(settings, moment)
    assert not left, f"{left} lineage event(s) queued before {moment:.0f} still undelivered after {timeout:.0f} s"


def wait_for(what: str, probe: Callable[[], object], deadline: float = DEADLINE) -> object:
    """``probe()`` until it returns something truthy; fails naming ``what`` and the last value otherwise."""
    end, last = time.monotonic() + deadline, None
    while time.monotonic() < end:
        last = probe()
        if last:
            return last
        time.sleep(2)
    pytest.fail(f"{what}: not within {deadline} s (last seen: {last!r})")
