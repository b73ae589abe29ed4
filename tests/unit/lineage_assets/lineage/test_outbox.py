"""Delivery logic of the outbox against a small local HTTP receiver standing in for the lineage backend's
/api/v1/lineage (ordering, retries, duplicates, terminal guard, dead letters). The same behaviour against the
real backend belongs to the service tests."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lineage_assets.lineage.outbox import Drainer, LineageEmitter, Outbox, OutboxError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """Records every POSTed event; ``answers`` maps (runId, eventType) to an HTTP status to return."""

    def __init__(self, port: int, hold_until_in_flight: int = 0) -> None:
        self.port = port
        #: hold each request until this many are in flight at once (a gate, not a delay); 0: answer at once
        self.hold_until_in_flight = hold_until_in_flight
        self.gate = threading.Event()
        self.gate_timed_out = False
        self.in_flight = 0
        self.max_in_flight = 0
        self.runs_in_flight: list[str] = []
        self.same_run_twice = False
        self.lock = threading.Lock()
        self.received: list[dict] = []
        self.answers: dict[tuple[str, str], list[int]] = {}
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                run_id = body["run"]["runId"]
                with receiver.lock:
                    receiver.same_run_twice |= run_id in receiver.runs_in_flight
                    receiver.runs_in_flight.append(run_id)
                    receiver.in_flight += 1
                    receiver.max_in_flight = max(receiver.max_in_flight, receiver.in_flight)
                    if receiver.in_flight >= receiver.hold_until_in_flight:
                        receiver.gate.set()
                # a drainer that never has that many requests in flight is let through after a generous deadline
                # (and marked), so a serial drainer fails the test instead of hanging it
                if not receiver.gate.wait(timeout=10):
                    receiver.gate_timed_out = True
                    receiver.gate.set()
                with receiver.lock:
                    receiver.in_flight -= 1
                    receiver.runs_in_flight.remove(run_id)
                queue = receiver.answers.get((body["run"]["runId"], body["eventType"]), [])
                status = queue.pop(0) if queue else 201
                if status < 300:
                    receiver.received.append(body)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b'{"error": "bad facet"}' if status >= 400 else b"")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        assert self.server
        self.server.shutdown()
        self.server.server_close()


def event(run: int, event_type: str, second: int) -> dict:
    return {
        "eventType": event_type,
        "eventTime": f"2025-05-01T10:00:{second:02d}.000Z",
        "run": {"runId": f"0195c1c0-0000-7000-8000-{run:012d}"},
        "job": {"namespace": "lineage-lab", "name": f"job-{run}"},
        "inputs": [],
        "outputs": [],
        "producer": "test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


@pytest.fixture
def port() -> int:
    return free_port()


def test_backend_down_then_up_delivers_everything_once_in_order_per_run(tmp_path, port):
    emitter = LineageEmitter(tmp_path / "outbox.sqlite", f"http://127.0.0.1:{port}", drain_in_background=True)
    try:
        sent = []
        for i in range(50):
            for run in range(4):
                kind = "START" if i == 0 else "COMPLETE" if i == 49 else "RUNNING"
                ev = event(run, kind, i)
                assert emitter.emit(ev)
                sent.append(ev)
        assert emitter.outbox.counts().queued == 200, "nothing is lost while the backend is down"
        receiver = Receiver(port).start()
        try:
            assert emitter.flush(timeout=60)
        finally:
            receiver.stop()
    finally:
        emitter.close()
    keys = [(e["run"]["runId"], e["eventType"], e["eventTime"]) for e in receiver.received]
    assert len(keys) == len(set(keys)) == 200, "each event exactly once"
    for run in range(4):
        run_id = f"0195c1c0-0000-7000-8000-{run:012d}"
        got = [e["eventTime"] for e in receiver.received if e["run"]["runId"] == run_id]
        assert got == sorted(got), f"run {run} delivered out of order"
    assert emitter.outbox.counts().sent == 200


def test_duplicates_are_dropped_and_counted(tmp_path):
    box = Outbox(tmp_path / "o.sqlite")
    assert box.enqueue(event(1, "START", 0))
    assert not box.enqueue(event(1, "START", 0))
    assert box.enqueue(event(1, "START", 1)), "another eventTime is another event"
    counts = box.counts()
    assert (counts.queued, counts.duplicates_dropped) == (2, 1)


def test_no_start_or_running_after_a_terminal_event(tmp_path, port):
    receiver = Receiver(port).start()
    box = Outbox(tmp_path / "o.sqlite")
    drainer = Drainer(box, f"http://127.0.0.1:{port}")
    try:
        box.enqueue(event(1, "START", 0))
        box.enqueue(event(1, "ABORT", 5))
        assert drainer.flush(10)
        box.enqueue(event(1, "RUNNING", 3))  # a sensor's late RUNNING for a run that already ended
        assert drainer.flush(10)
    finally:
        receiver.stop()
    assert [e["eventType"] for e in receiver.received] == ["START", "ABORT"]
    assert box.counts().superseded == 1


def test_rejected_event_is_dead_lettered_with_the_reason_and_the_run_goes_on(tmp_path, port):
    receiver = Receiver(port).start()
    bad = event(2, "RUNNING", 1)
    receiver.answers[(bad["run"]["runId"], "RUNNING")] = [422]
    box = Outbox(tmp_path / "o.sqlite")
    try:
        for e in (event(2, "START", 0), bad, event(2, "COMPLETE", 2)):
            box.enqueue(e)
        assert Drainer(box, f"http://127.0.0.1:{port}").flush(10)
    finally:
        receiver.stop()
    (dead,) = box.dead_letters()
    assert (dead.event_type, dead.job) == ("RUNNING", "lineage-lab/job-2")
    assert "HTTP 422" in dead.reason and "bad facet" in dead.reason
    assert [e["eventType"] for e in receiver.received] == ["START", "COMPLETE"]
    assert box.counts().rejected == 1


def test_server_errors_are_retried(tmp_path, port):
    receiver = Receiver(port).start()
    ev = event(3, "START", 0)
    receiver.answers[(ev["run"]["runId"], "START")] = [503, 500]
    box = Outbox(tmp_path / "o.sqlite")
    try:
        box.enqueue(ev)
        assert Drainer(box, f"http://127.0.0.1:{port}").flush(20)
    finally:
        receiver.stop()
    assert len(receiver.received) == 1
    assert box.counts().sent == 1


def test_two_drainers_on_one_outbox_never_send_an_event_twice(tmp_path, port):
    receiver = Receiver(port).start()
    path = tmp_path / "o.sqlite"
    producer = Outbox(path)
    for i in range(30):
        for run in range(3):
            producer.enqueue(event(run, "RUNNING", i))
    drainers = [Drainer(Outbox(path), f"http://127.0.0.1:{port}") for _ in range(2)]
    try:
        threads = [threading.Thread(target=d.flush, args=(30,)) for d in drainers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        receiver.stop()
    keys = [(e["run"]["runId"], e["eventTime"]) for e in receiver.received]
    assert len(keys) == len(set(keys)) == 90


def test_malformed_events_are_refused_with_what_is_missing(tmp_path):
    box = Outbox(tmp_path / "o.sqlite")
    with pytest.raises(OutboxError, match=r"needs run\.runId, eventType, eventTime"):
        box.enqueue({"eventType": "START"})
    with pytest.raises(OutboxError):
        box.enqueue("not json")


def test_runs_are_delivered_in_parallel_each_in_its_own_order(tmp_path, port):
    """A backend that answers the first request only once four are in flight at once (a gate, no delay): four
    workers get there, never with two events of one run in flight, and each run arrives in order."""
    receiver = Receiver(port, hold_until_in_flight=4).start()
    outbox = Outbox(tmp_path / "outbox.sqlite")
    try:
        for i in range(10):
            for run in range(8):
                outbox.enqueue(event(run, "START" if i == 0 else "RUNNING", i))
        drainer = Drainer(outbox, f"http://127.0.0.1:{port}", workers=4)
        assert drainer.flush(timeout=60)
        drainer.stop()
    finally:
        receiver.stop()
    assert len(receiver.received) == 80
    assert not receiver.gate_timed_out, "four requests never were in flight at once: runs did not travel in parallel"
    assert receiver.max_in_flight == 4, "at most one request per worker"
    assert not receiver.same_run_twice, "two events of one run were in flight at once"
    for run in range(8):
        run_id = f"0195c1c0-0000-7000-8000-{run:012d}"
        got = [e["eventTime"] for e in receiver.received if e["run"]["runId"] == run_id]
        assert got == sorted(got) and len(got) == 10, f"run {run} delivered out of order or incompletely"


class FakeClock:
    """Stands in for the outbox module's ``time``: wall-clock time is what the test sets, the rest is real."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_backlog_age_is_the_wait_of_the_oldest_queued_event(tmp_path, monkeypatch):
    clock = FakeClock(1_746_093_600.0)
    monkeypatch.setattr("lineage_assets.lineage.outbox.time", clock)
    outbox = Outbox(tmp_path / "outbox.sqlite")
    assert outbox.counts().backlog_age == 0.0
    outbox.enqueue(event(1, "START", 0))
    clock.now += 42.0
    outbox.enqueue(event(2, "START", 0))
    clock.now += 8.0
    assert outbox.counts().backlog_age == 50.0, "the oldest queued event has waited 50 s"
    clock.now -= 100.0
    assert outbox.counts().backlog_age == 0.0, "a clock set back gives no negative age"


# --- exact values (issue 28: each pins a mutant of the per-run ordering; see docs/mutation.md) --------------------
def test_an_event_is_accepted_as_a_run_event_as_json_text_or_as_a_dict(tmp_path):
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

    box = Outbox(tmp_path / "o.sqlite")
    run_id = "0195c1c0-0000-7000-8000-000000000007"
    as_object = RunEvent(
        eventType=RunState.START,
        eventTime="2025-05-01T10:00:00.000Z",
        run=Run(runId=run_id),
        job=Job(namespace="lineage-lab", name="job-7"),
        producer="test",
    )
    assert box.enqueue(as_object)
    assert box.enqueue(json.dumps(event(7, "RUNNING", 1)))
    assert box.enqueue(event(7, "COMPLETE", 2))
    assert [(e["run"]["runId"], e["eventType"]) for e in box.events()] == [
        (run_id, "START"),
        (run_id, "RUNNING"),
        (run_id, "COMPLETE"),
    ]


def test_a_failed_enqueue_rolls_back_and_leaves_the_outbox_usable(tmp_path, monkeypatch):
    box = Outbox(tmp_path / "o.sqlite")
    assert box.enqueue(event(1, "START", 0))

    def broken(db, name):
        raise RuntimeError("counter broken")

    monkeypatch.setattr(Outbox, "_bump", staticmethod(broken))
    with pytest.raises(RuntimeError, match="counter broken"):
        box.enqueue(event(1, "START", 0))  # a duplicate: counting it fails inside the transaction
    monkeypatch.undo()
    assert box.enqueue(event(1, "RUNNING", 1)), "the transaction was rolled back, the next one starts"
    assert box.counts().queued == 2


def test_ended_is_true_once_a_terminal_event_of_the_run_is_queued_or_sent_not_dead(tmp_path):
    box = Outbox(tmp_path / "o.sqlite")
    box.enqueue(event(1, "START", 0))
    assert not box.ended(event(1, "START", 0)["run"]["runId"])
    for run, kind in ((1, "COMPLETE"), (2, "ABORT"), (3, "FAIL"), (4, "COMPLETE")):
        box.enqueue(event(run, kind, 1))
    (seq4,) = [seq for seq, _, payload in box.lease_next("me", limit=10) if '"job-4"' in payload]
    box.record([(seq4, "dead", "HTTP 422: no")])
    ended = {run: box.ended(event(run, "START", 0)["run"]["runId"]) for run in (1, 2, 3, 4, 5)}
    assert ended == {1: True, 2: True, 3: True, 4: False, 5: False}
    assert box.enqueue(event(4, "START", 2)), "after a dead-lettered end the run may start again"
    assert box.counts().superseded == 0


def test_a_lease_round_takes_the_head_of_at_most_100_runs_by_default(tmp_path):
    box = Outbox(tmp_path / "o.sqlite")
    for run in range(101):
        box.enqueue(event(run, "START", 0))
    assert len(box.lease_next("me")) == 100


def test_leases_are_measured_on_the_clock_the_caller_gives(tmp_path):
    box = Outbox(tmp_path / "o.sqlite")
    box.enqueue(event(1, "START", 0))
    later = time.time() + 1000
    assert [t for _, t, _ in box.lease_next("a", now=later)] == ["START"]
    assert box.lease_next("b", now=later + 29) == [], "a's lease still holds"
    assert [t for _, t, _ in box.lease_next("b", now=later + 31)] == ["START"], "a's lease ran out"
