"""What a sensor asks for after it records materializations: a run of their checks, only those no run of the same
sensor that has not started yet covers (a started run may have read an older materialization). Runs are put in a
real (ephemeral) Dagster instance; the expected check keys are written out by hand."""

from __future__ import annotations

import dagster as dg
from dagster._core.events import DagsterEvent, DagsterEventType

from lineage_assets.latest_checks import REQUESTED_BY, LatestChecks

ORDERS, ARCHIVE, OTHER = dg.AssetKey(["iceberg", "orders"]), dg.AssetKey(["s3", "archive"]), dg.AssetKey(["x"])
JOB = "streaming_lineage_checks"


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec("exists", asset=ORDERS),
        dg.AssetCheckSpec("schema", asset=ORDERS),
        dg.AssetCheckSpec("exists", asset=ARCHIVE),
        dg.AssetCheckSpec("exists", asset=OTHER),
    ]
)
def lineage_checks():
    yield from ()


@dg.asset_check(asset=ARCHIVE)
def conservation():
    return dg.AssetCheckResult(passed=True)


LATEST = LatestChecks.of(JOB, [lineage_checks, conservation], [ORDERS, ARCHIVE])
#: the same, a sensor asking for a check run at most every 60 s
EVERY_60_S = LatestChecks.of(JOB, [lineage_checks, conservation], [ORDERS, ARCHIVE], min_interval_s=60)
NOW = 1_000_000.0


def key(asset: dg.AssetKey, name: str) -> dg.AssetCheckKey:
    return dg.AssetCheckKey(asset, name)


#: the event that moves a run into each state (a queued run needs a code location's origin: STARTING stands for the
#: states before the run reads anything)
MOVED_BY = {
    dg.DagsterRunStatus.STARTING: DagsterEventType.RUN_STARTING,
    dg.DagsterRunStatus.STARTED: DagsterEventType.RUN_START,
}


def add_run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, checks, sensor="flink_job_sensor") -> None:
    run = instance.add_run(
        dg.DagsterRun(
            job_name=JOB,
            status=dg.DagsterRunStatus.NOT_STARTED,
            tags={REQUESTED_BY: sensor},
            asset_check_selection=frozenset(checks),
        )
    )
    if status in MOVED_BY:
        instance.run_storage.handle_run_event(
            run.run_id, DagsterEvent(event_type_value=MOVED_BY[status].value, job_name=JOB)
        )
    assert instance.get_run_by_id(run.run_id).status == status


def test_the_checks_of_the_given_assets_only():
    assert LATEST.checks_of == {
        ORDERS: (key(ORDERS, "exists"), key(ORDERS, "schema")),
        ARCHIVE: (key(ARCHIVE, "exists"), key(ARCHIVE, "conservation")),
    }


def test_a_materialization_asks_for_its_checks_under_a_key_counted_in_the_cursor():
    instance, cursor = dg.DagsterInstance.ephemeral(), {"iceberg-ingestion": {"open": "r1"}}

    first = LATEST.request(instance, "flink_job_sensor", [ORDERS, ORDERS], cursor, NOW)
    second = LATEST.request(instance, "flink_job_sensor", [ARCHIVE], cursor, NOW)

    assert first.run_key == "flink_job_sensor-checks-1" and second.run_key == "flink_job_sensor-checks-2"
    assert first.job_name == JOB
    assert list(first.asset_check_keys) == [key(ORDERS, "exists"), key(ORDERS, "schema")]
    assert first.tags == {REQUESTED_BY: "flink_job_sensor"}
    assert cursor == {"iceberg-ingestion": {"open": "r1"}, "check_requests": 2, "checks_asked_at": NOW}


def test_nothing_materialized_or_unchecked_asks_for_nothing():
    instance, cursor = dg.DagsterInstance.ephemeral(), {}
    assert LATEST.request(instance, "flink_job_sensor", [], cursor, NOW) is None
    assert LATEST.request(instance, "flink_job_sensor", [OTHER], cursor, NOW) is None
    assert cursor == {}


def test_a_run_not_started_yet_covers_its_checks_and_a_started_one_does_not():
    instance, cursor = dg.DagsterInstance.ephemeral(), {}
    add_run(instance, dg.DagsterRunStatus.STARTING, [key(ORDERS, "exists"), key(ORDERS, "schema")])
    add_run(instance, dg.DagsterRunStatus.STARTED, [key(ARCHIVE, "exists"), key(ARCHIVE, "conservation")])

    assert LATEST.request(instance, "flink_job_sensor", [ORDERS], cursor, NOW) is None
    both = LATEST.request(instance, "flink_job_sensor", [ORDERS, ARCHIVE], cursor, NOW)
    assert list(both.asset_check_keys) == [key(ARCHIVE, "exists"), key(ARCHIVE, "conservation")]


def test_another_sensors_waiting_run_covers_nothing():
    instance = dg.DagsterInstance.ephemeral()
    add_run(instance, dg.DagsterRunStatus.NOT_STARTED, [key(ARCHIVE, "exists")], sensor="connector_sensor")
    request = LATEST.request(instance, "flink_job_sensor", [ARCHIVE], {}, NOW)
    assert list(request.asset_check_keys) == [key(ARCHIVE, "exists"), key(ARCHIVE, "conservation")]
    assert LATEST.request(instance, "connector_sensor", [ARCHIVE], {}, NOW).asset_check_keys == [
        key(ARCHIVE, "conservation")
    ]


def test_within_the_interval_the_assets_stay_owed_and_a_later_tick_asks_for_them_without_a_materialization():
    instance, cursor = dg.DagsterInstance.ephemeral(), {}
    first = EVERY_60_S.request(instance, "flink_job_sensor", [ORDERS], cursor, NOW)
    assert list(first.asset_check_keys) == [key(ORDERS, "exists"), key(ORDERS, "schema")]

    assert EVERY_60_S.request(instance, "flink_job_sensor", [ARCHIVE], cursor, NOW + 30) is None
    assert EVERY_60_S.request(instance, "flink_job_sensor", [ORDERS], cursor, NOW + 59) is None
    assert cursor["checks_owed"] == ["s3/archive", "iceberg/orders"]

    later = EVERY_60_S.request(instance, "flink_job_sensor", [], cursor, NOW + 60)
    assert list(later.asset_check_keys) == [
        key(ARCHIVE, "exists"),
        key(ARCHIVE, "conservation"),
        key(ORDERS, "exists"),
        key(ORDERS, "schema"),
    ]
    assert later.run_key == "flink_job_sensor-checks-2"
    assert cursor == {"check_requests": 2, "checks_asked_at": NOW + 60}
    assert EVERY_60_S.request(instance, "flink_job_sensor", [], cursor, NOW + 200) is None
