import datetime as dt

from infra.settings import StackSettings
from lineage_assets.connect.client import ConnectorStatus, TaskStatus
from lineage_assets.connect.incarnations import Incarnation
from lineage_assets.connect.runs import Track, run_id_of, step
from lineage_assets.lineage.events import EventBuilder
from lineage_assets.lineage.identity import Pipeline

T0 = dt.datetime(2025, 5, 1, 10, 0, tzinfo=dt.UTC)
BUILDER = EventBuilder(Pipeline.from_settings(StackSettings()))


def status(state="RUNNING", *tasks: str, trace: str | None = None) -> ConnectorStatus:
    tasks = tasks or ("RUNNING",)
    return ConnectorStatus(
        "orders-s3-sink",
        state,
        "w",
        tuple(TaskStatus(i, t, "w", trace if t == "FAILED" else None) for i, t in enumerate(tasks)),
    )


def run(observations, schema="v1"):
    """Feed (status, schema) observations one minute apart; return the (eventType, runId) of every event."""
    track, out = Track(), []
    for i, obs in enumerate(observations):
        st, sch = obs if isinstance(obs, tuple) else (obs, schema)
        track, events = step("orders-s3-sink", track, st, sch, BUILDER, T0 + dt.timedelta(minutes=i))
        out += [(e.eventType.value, e.run.runId) for e in events]
    return out, track


def test_first_running_opens_one_run_and_steady_running_is_quiet():
    events, track = run([status(), status(), status()])
    assert [e for e, _ in events] == ["START", "RUNNING"]
    assert len({r for _, r in events}) == 1 and track.run_id == events[0][1]


def test_new_schema_version_emits_running_in_the_same_run():
    events, _ = run([(status(), "v1"), (status(), "v1"), (status(), "v2")])
    assert [e for e, _ in events] == ["START", "RUNNING", "RUNNING"]
    assert len({r for _, r in events}) == 1


def test_failed_task_fails_the_run_once_with_its_trace():
    trace = "org.apache.kafka.connect.errors.DataException: bad record\n\tat ..."
    track = Track()
    track, _ = step("orders-s3-sink", track, status(), "v1", BUILDER, T0)
    track, events = step(
        "orders-s3-sink", track, status("RUNNING", "RUNNING", "FAILED", trace=trace), "v1", BUILDER, T0
    )
    (fail,) = events
    assert fail.eventType.value == "FAIL"
    error = fail.run.facets["errorMessage"]
    assert error.stackTrace == trace and "task 1 failed" in error.message and error.programmingLanguage == "JAVA"
    assert track.run_id is None
    _, again = step("orders-s3-sink", track, status("RUNNING", "RUNNING", "FAILED", trace=trace), "v1", BUILDER, T0)
    assert again == [], "a failure is reported once"


def test_failure_before_any_record_still_reports_a_run():
    events, _ = run([status("RUNNING", "FAILED", trace="boom")])
    assert [e for e, _ in events] == ["START", "FAIL"]
    assert events[0][1] == events[1][1]


def test_pause_aborts_and_resume_starts_a_new_run():
    events, _ = run([status(), status("PAUSED", "PAUSED"), status("PAUSED", "PAUSED"), status()])
    kinds = [e for e, _ in events]
    assert kinds == ["START", "RUNNING", "ABORT", "START", "RUNNING"]
    assert events[0][1] == events[2][1] != events[3][1]


def test_deleted_connector_aborts_its_run():
    events, track = run([status(), None])
    assert [e for e, _ in events] == ["START", "RUNNING", "ABORT"]
    assert track.run_id is None


def test_every_event_carries_the_connector_datasets_and_streaming_job_type():
    _, events = step("orders-s3-sink", Track(), status(), "v1", BUILDER, T0)
    for ev in events:
        assert ev.job.facets["jobType"].processingType == "STREAMING"
        assert ev.job.facets["jobType"].integration == "KAFKA_CONNECT"
        assert [i.name for i in ev.inputs] == ["orders"] and [o.name for o in ev.outputs] == [
            "topics/orders",
            "orders-dlq",
        ]


RUN_A, RUN_B = "01960000-0000-7000-8000-00000000000a", "01960000-0000-7000-8000-00000000000b"


def incarnation(ref: str, resumed: str | None = None) -> Incarnation:
    return Incarnation("orders-s3-sink", ref, 1_700_000_000_000, resumed)


def test_a_connector_deleted_and_created_again_between_two_looks_gets_a_new_run():
    first, second = incarnation("_connect-configs:0@4"), incarnation("_connect-configs:0@10")
    track, opened = step("orders-s3-sink", Track(), status(), "v1", BUILDER, T0, first, lambda: RUN_A)
    assert [e.eventType.value for e in opened] == ["START", "RUNNING"] and track.run_id == RUN_A
    track, events = step("orders-s3-sink", track, status(), "v1", BUILDER, T0, second, lambda: RUN_B)
    assert [(e.eventType.value, e.run.runId) for e in events] == [
        ("ABORT", RUN_A),
        ("START", RUN_B),
        ("RUNNING", RUN_B),
    ]
    facet = events[1].run.facets["kafka_connector"]
    assert facet.incarnation == "_connect-configs:0@10" and facet.tasks[0].state == "RUNNING"


def test_a_worker_restart_keeps_the_run():
    inc = incarnation("_connect-configs:0@4")
    track, _ = step("orders-s3-sink", Track(), status(), "v1", BUILDER, T0, inc, lambda: RUN_A)
    track, during = step("orders-s3-sink", track, status("UNASSIGNED", "UNASSIGNED"), "v1", BUILDER, T0, inc)
    track, after = step("orders-s3-sink", track, status(), "v1", BUILDER, T0, inc)
    assert during == [] and after == [] and track.run_id == RUN_A


def test_run_ids_come_from_connects_records_alone_and_skip_runs_that_ended():
    job = Pipeline.from_settings(StackSettings()).job("orders-s3-sink")
    created = run_id_of(job, incarnation("_connect-configs:0@4"), lambda run: False)
    assert created == run_id_of(job, incarnation("_connect-configs:0@4"), lambda run: False), "the same everywhere"
    resumed = run_id_of(job, incarnation("_connect-configs:0@4", "_connect-configs:0@9"), lambda run: False)
    assert resumed != created, "a resume is a new stretch"
    after_failure = run_id_of(job, incarnation("_connect-configs:0@4"), lambda run: run == created)
    assert after_failure not in (created, resumed), "a restarted task after a failure: the next id of the chain"


def test_a_cursor_written_by_another_version_still_loads():
    track = Track.load({"run_id": RUN_A, "last_state": "RUNNING", "stretch": 3, "something": "new"})
    assert track.run_id == RUN_A and track.last_state == "RUNNING"
