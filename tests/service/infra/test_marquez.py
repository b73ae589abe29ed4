"""Marquez in the stack: both services answer on loopback only, the web UI proxies the API, and lineage delivery
survives Marquez being killed mid-burst: nothing lost, each run's events stored in order, each run in its own
terminal state, and a late RUNNING never re-opens a finished run."""

from __future__ import annotations

import datetime as dt
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import requests

from infra import supervisor
from infra.services.base import read_pid
from infra.services.marquez import Marquez, MarquezWeb
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.lineage.outbox import Drainer, Outbox

RUNS = 20
EVENTS_PER_RUN = 10  # START, 8 RUNNING, a terminal event: 200 in all
ENDINGS = ("COMPLETE", "FAIL", "ABORT")
MARQUEZ_STATE = {"COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED"}


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                found.add(address)
    return found


def test_marquez_and_its_ui_listen_on_loopback_only(settings):
    loopback = {"0100007F"}  # 127.0.0.1 as /proc/net/tcp writes it
    for port in (settings.marquez_port, settings.marquez_admin_port, settings.marquez_web_port):
        assert listening_addresses(port) == loopback, f"port {port} listens on {listening_addresses(port)}"


def test_the_web_ui_serves_the_app_and_proxies_the_api(settings):
    assert requests.get(f"{settings.marquez_web_url}/healthcheck", timeout=5).text == "OK"
    page = requests.get(f"{settings.marquez_web_url}/", timeout=5)
    assert page.status_code == 200 and "bundle.js" in page.text
    via_ui = requests.get(f"{settings.marquez_web_url}/api/v1/namespaces", timeout=5).json()
    direct = requests.get(f"{settings.marquez_url}/api/v1/namespaces", timeout=5).json()
    assert {n["name"] for n in via_ui["namespaces"]} == {n["name"] for n in direct["namespaces"]}


def burst(namespace: str, start: dt.datetime) -> list[dict]:
    """RUNS runs of EVENTS_PER_RUN events each, interleaved run by run as concurrent producers would emit them."""
    run_ids = [str(uuid.uuid4()) for _ in range(RUNS)]
    events = []
    for i in range(EVENTS_PER_RUN):
        for run in range(RUNS):
            kind = "START" if i == 0 else ENDINGS[run % 3] if i == EVENTS_PER_RUN - 1 else "RUNNING"
            events.append(
                {
                    "eventType": kind,
                    "eventTime": (start + dt.timedelta(seconds=i))
                    .isoformat(timespec="milliseconds")
                    .replace("+00:00", "Z"),
                    "run": {"runId": run_ids[run]},
                    "job": {"namespace": namespace, "name": f"burst-{run:02d}"},
                    "inputs": [],
                    "outputs": [],
                    "producer": "https://github.com/lineage-lab/lineage-lab/tests",
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                }
            )
    return events


def instant(text: str) -> dt.datetime:
    """An ISO-8601 event time as the instant it names."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def stored_order(settings, namespace: str) -> dict[str, list[tuple[str, str]]]:
    """Per run, the (eventType, eventTime) Marquez stored, in the order it stored them. Marquez's API sorts events
    by event time only, so the order of arrival is read from its own table (lineage_events.created_at)."""
    with psycopg.connect(settings.postgres_dsn("marquez", "marquez", settings.marquez_db_password)) as conn:
        rows = conn.execute(
            "SELECT run_uuid::text, event_type, event->>'eventTime' FROM lineage_events "
            "WHERE job_namespace = %s ORDER BY created_at, event_time",
            (namespace,),
        ).fetchall()
    runs: dict[str, list[tuple[str, str]]] = {}
    for run_id, kind, when in rows:
        runs.setdefault(run_id, []).append((kind, when))
    return runs


def test_a_killed_marquez_loses_nothing_and_keeps_each_runs_order(settings, tmp_path):
    namespace = f"lineage-lab-tests-{uuid.uuid4().hex[:8]}"
    events = burst(namespace, dt.datetime.now(dt.UTC))
    outbox = Outbox(tmp_path / "outbox.sqlite")
    for event in events:
        outbox.enqueue(event)
    late = [{**e, "eventType": "RUNNING", "eventTime": e["eventTime"].replace("Z", "1Z")} for e in events[-RUNS:]]
    for event in late:  # a RUNNING queued after its run ended: kept back, never sent
        outbox.enqueue(event)
    assert outbox.counts().superseded == RUNS

    marquez = Marquez(settings)
    drainer = Drainer(outbox, settings.marquez_url, workers=settings.lineage_drain_workers)
    killed = threading.Event()
    try:
        drainer.start()
        deadline = time.monotonic() + 60
        while outbox.counts().sent < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        sent_before_kill = outbox.counts().sent
        assert 0 < sent_before_kill < len(events), "the kill must land in the middle of the burst"
        pid = read_pid(marquez)
        assert pid, "marquez is not running"
        os.kill(pid, signal.SIGKILL)
        killed.set()
        while read_pid(marquez) is not None:
            time.sleep(0.1)
        # the drainer meets the dead Marquez: an event it tried is queued again with the error (the outbox's record)
        deadline = time.monotonic() + 60
        while not outbox.pending_errors() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert outbox.pending_errors(), "the drainer never recorded a failed delivery to the dead Marquez"
        assert outbox.counts().queued > 0
        supervisor.start(marquez, log=lambda _: None)
        assert drainer.flush(timeout=180), f"still queued after restart: {outbox.counts()}"
    finally:
        drainer.stop()
        if read_pid(marquez) is None:
            supervisor.start(marquez, log=lambda _: None)
    assert killed.is_set()
    counts = outbox.counts()
    assert (counts.sent, counts.rejected, counts.superseded) == (len(events), 0, RUNS)

    stored = stored_order(settings, namespace)
    client = MarquezClient(settings.marquez_url)
    for run in range(RUNS):
        run_events = [e for e in events if e["job"]["name"] == f"burst-{run:02d}"]
        run_id = run_events[0]["run"]["runId"]
        sent = [(e["eventType"], e["eventTime"]) for e in run_events]
        got = stored.get(run_id, [])
        # an event whose answer was lost in the kill is sent again: Marquez may hold it twice, next to itself
        deduplicated = [item for i, item in enumerate(got) if i == 0 or item != got[i - 1]]
        # Marquez keeps the instant, not the spelling: it writes 09:28:32.980Z back as 09:28:32.98Z
        assert [(k, instant(t)) for k, t in deduplicated] == [(k, instant(t)) for k, t in sent], (
            f"run {run}: lost or reordered"
        )
        state = client.run(run_id)["state"]
        assert state == MARQUEZ_STATE[ENDINGS[run % 3]], f"run {run} is {state} in Marquez"


def test_marquez_web_restarts_cleanly(settings):
    """A stop and start of the UI server alone (its pid is its process group: node and nothing else)."""
    web = MarquezWeb(settings)
    assert supervisor.stop(web) == "stopped"
    supervisor.start(web, log=lambda _: None)
    assert requests.get(f"{settings.marquez_web_url}/healthcheck", timeout=5).text == "OK"


@pytest.fixture(autouse=True, scope="module")
def _marquez_back_up(settings):
    yield
    supervisor.start(Marquez(settings), log=lambda _: None)
