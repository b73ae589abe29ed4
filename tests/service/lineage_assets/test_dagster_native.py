"""What a Dagster user sees through the webserver's GraphQL: the new-orders sensor is an asset sensor on Iceberg
orders and, run by the stack's daemon, asks for each new snapshot's days exactly once; every streaming asset has
check results for its latest materialization."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import dagster as dg
import pytest
import requests
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from pyiceberg.expressions import In

from infra.services.iceberg_catalog import load_catalog
from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.source.orders import ensure_table
from tests.support.engine_waits import wait_for_tick
from tests.support.ui_pages import ARTIFACTS, open_page

defs = build_definitions(StackSettings.from_env())

pytestmark = pytest.mark.service

SENSOR = "supplier_stats_new_orders_sensor"
ORDERS = ["iceberg", "default", "orders"]
#: the assets whose producers run forever (the reference lab's streaming side), written out by hand
STREAMING = [
    ["kafka", "orders"],
    ["s3", "orders_archive"],
    ["iceberg", "default", "orders"],
    ["kafka", "supplier_stats"],
    ["kafka", "dead_letters", "orders_dlq"],
    ["kafka", "dead_letters", "orders_dlq_flink"],
    ["kafka", "dead_letters", "orders_dlq_supplier_stats"],
]

SENSOR_QUERY = """
query ($name: String!) {
  sensorOrError(sensorSelector: {repositoryLocationName: "lineage_assets", repositoryName: "__repository__",
                                 sensorName: $name}) {
    __typename
    ... on Sensor { sensorType metadata { assetKeys { path } } sensorState { status } }
  }
}"""

CHECKS_QUERY = """
query ($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    __typename
    ... on AssetNode {
      assetChecksOrError { ... on AssetChecks { checks { name } } }
    }
  }
}"""


def graphql(settings, query: str, **variables) -> dict:
    resp = requests.post(
        f"http://{settings.host}:{settings.dagster_port}/graphql",
        json={"query": query, "variables": variables},
        timeout=60,
    )
    resp.raise_for_status()
    body = resp.json()
    assert "errors" not in body, body["errors"]
    return body["data"]


def test_the_new_orders_sensor_is_an_asset_sensor_on_iceberg_orders(settings):
    sensor = graphql(settings, SENSOR_QUERY, name=SENSOR)["sensorOrError"]
    assert sensor["__typename"] == "Sensor", sensor
    assert sensor["sensorType"] == "ASSET"
    assert [k["path"] for k in sensor["metadata"]["assetKeys"]] == [ORDERS]


def days_of(summary: dict[str, str]) -> set[str]:
    """The bid_time days a snapshot summary names (read here, independently of the sensor's reader)."""
    return {
        part.split("=", 1)[1]
        for key in summary
        if key.startswith("partitions.")
        for part in key.removeprefix("partitions.").split("/")
        if part.startswith("bid_time_day=")
    }


@pytest.mark.timeout(1200)  # minutes in CI: the default service limit would leave too little room
def test_a_snapshot_that_touches_two_days_gives_one_run_per_day_once(settings, stack_instance, flink_jobs_run):
    """Orders of yesterday and today through the real path; the stack's daemon (flink_job_sensor reporting the
    snapshot, then the asset sensor) launches one supplier_stats run per day the new snapshots changed, once. After
    the main run: the pipeline is deployed through the stack's instance and the sensor has its cursor."""
    assert graphql(settings, SENSOR_QUERY, name=SENSOR)["sensorOrError"]["sensorState"]["status"] == "RUNNING"
    table = load_catalog(settings).load_table("default.orders")
    before = table.current_snapshot()
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    today, yesterday = now.date(), (now - dt.timedelta(days=1)).date()
    bid_times = {
        yesterday: now - dt.timedelta(days=1),
        today: max(dt.datetime.combine(today, dt.time(0)), now - dt.timedelta(seconds=30)),
    }
    ids = [f"two-days-{uuid.uuid4()}" for _ in range(6)]
    rows = [(i, "Dana", "Desk", "40.00", bid_times[d]) for i, d in zip(ids, [yesterday, today] * 3, strict=True)]
    with defs.resources["source_db"].connect() as conn:
        ensure_table(conn)
        with conn.cursor() as cur:  # one transaction
            cur.executemany(
                "INSERT INTO public.orders (order_id, supplier, item, price, bid_time) VALUES (%s, %s, %s, %s, %s)",
                rows,
            )
    deadline = time.monotonic() + 240
    while table.refresh().scan(row_filter=In("order_id", ids)).to_arrow().num_rows < len(ids):
        assert time.monotonic() < deadline, "the orders did not reach Iceberg in 4 minutes"
        time.sleep(2)

    # the judge: the snapshots committed since, and the days each one's summary names
    chain, at = [], table.current_snapshot()
    while at is not None and (before is None or at.snapshot_id != before.snapshot_id):
        chain.append(at)
        at = table.snapshot_by_id(at.parent_snapshot_id) if at.parent_snapshot_id else None
    expected = {f"{s.snapshot_id}:{day}" for s in chain for day in days_of(s.summary.additional_properties)}
    assert {key.split(":")[1] for key in expected} == {yesterday.isoformat(), today.isoformat()}

    committed_ms = {str(s.snapshot_id): s.timestamp_ms for s in chain}

    def runs_of_days() -> list[dg.DagsterRun]:
        """Runs of supplier_stats for our days that read our snapshots: requested for one of them, or (a day
        whose run was already queued is not asked for again) started after the snapshot was committed."""
        runs = stack_instance.get_runs(filters=dg.RunsFilter(job_name="supplier_stats_days_job"), limit=100)
        first_ms = min(committed_ms.values())
        return [
            r
            for r in runs
            if r.tags.get("dagster/run_key") in expected
            or (
                r.tags.get("dagster/partition") in (yesterday.isoformat(), today.isoformat())
                and (stack_instance.get_run_record_by_id(r.run_id).start_time or 0) * 1000 > first_ms
            )
        ]

    def covered() -> set[str]:
        return {r.tags["dagster/partition"] for r in runs_of_days()}

    deadline = time.monotonic() + 300
    while covered() != {yesterday.isoformat(), today.isoformat()}:
        assert time.monotonic() < deadline, f"runs of {sorted(covered())} only, after snapshots {expected}"
        time.sleep(5)
    deadline = time.monotonic() + 600
    while any(r.status not in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE) for r in runs_of_days()):
        assert time.monotonic() < deadline, "the supplier_stats runs did not finish in 10 minutes"
        time.sleep(5)
    # then the sensors see the finished runs: a tick of flink_job_sensor (reporting the latest snapshot) and, after
    # it, one of the new-orders sensor; anything asked for twice would be asked for by then
    reported = wait_for_tick(settings, "flink_job_sensor", after=time.time())
    wait_for_tick(settings, SENSOR, after=reported["endTimestamp"])
    keyed = [r.tags["dagster/run_key"] for r in runs_of_days() if r.tags.get("dagster/run_key") in expected]
    assert len(keyed) == len(set(keyed)), f"a snapshot's day requested twice: {sorted(keyed)}"
    assert set(keyed) <= expected
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs_of_days())
    # a (snapshot, day) not asked for is one whose day already had a run queued: a run of that day that started after
    # the snapshot was committed, so it read it (one snapshot and nothing queued: every key asked for)
    for key in sorted(expected - set(keyed)):
        snapshot, day = key.split(":")
        started_after = [
            r.run_id
            for r in runs_of_days()
            if r.tags.get("dagster/partition") == day
            and (stack_instance.get_run_record_by_id(r.run_id).start_time or 0) * 1000 > committed_ms[snapshot]
        ]
        assert started_after, f"{key} was neither asked for nor read by a run of {day} started after its commit"


#: a check execution that has a result
RESOLVED = (AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED)
#: the run tag naming the sensor that asked for a check run, and the Iceberg orders' sensor, written out by hand
REQUESTED_BY = "lineage-lab/checks-requested-by"
FLINK_SENSOR = "flink_job_sensor"
#: checks of the Iceberg orders the checks tab must list
LISTED_CHECKS = ("conservation", "lineage_dataset_exists", "lineage_run_state_agrees", "flink_job_version_current")


def latest_storage_id(instance: dg.DagsterInstance, key: dg.AssetKey) -> int | None:
    """The storage id of the latest materialization of ``key`` (None: never materialized, as a dead-letter topic
    nothing was dead-lettered to)."""
    records = instance.fetch_materializations(key, limit=1).records
    return records[0].storage_id if records else None


def evaluated(record) -> int | None:
    """The storage id of the materialization a check execution evaluated (None: none)."""
    target = record.event.dagster_event.event_specific_data.target_materialization_data
    return target.storage_id if target else None


@pytest.fixture(scope="module", autouse=True)  # taken before the module's first test
def latest_at_start(stack_instance, flink_jobs_run) -> dict[dg.AssetKey, int | None]:
    """Each streaming asset's latest materialization when the module begins (after the main run). The two tests
    that wait for check runs evaluating a later materialization measure from here: those runs come only every
    180 s under the test settings, so the module's earlier tests (minutes of Spark runs) already wait for them,
    instead of each test waiting for a run of its own, one after the other."""
    return {dg.AssetKey(path): latest_storage_id(stack_instance, dg.AssetKey(path)) for path in STREAMING}


def resolved_since(instance: dg.DagsterInstance, check: dg.AssetCheckKey, storage_id: int | None) -> list:
    """The executions of ``check`` with a result that evaluated the materialization ``storage_id`` or a later one,
    or any with a result when the asset has none (once there, they stay: the history only grows)."""
    return [
        r
        for r in instance.event_log_storage.get_asset_check_execution_history(check, limit=25)
        if r.status in RESOLVED and (storage_id is None or (evaluated(r) or 0) >= storage_id)
    ]


@pytest.mark.timeout(900)  # a check run a sensor asks for at most every 180 s under the test settings
def test_every_streaming_asset_gets_check_results_for_what_it_materialized(settings, stack_instance, latest_at_start):
    """The sensors ask for runs of the checks of what they materialize, the schedule runs the rest: for each
    streaming asset, every check gets a result for the materialization that was the latest at the module's start,
    or a later one (a result at all for an asset never materialized). That only ever becomes true, so it is waited
    for once (the deadline a failure detector)."""
    since = {}
    for path in STREAMING:
        node = graphql(settings, CHECKS_QUERY, path=path)["assetNodeOrError"]
        assert node["__typename"] == "AssetNode", (path, node)
        checks = node["assetChecksOrError"]["checks"]
        assert checks, f"{path} has no checks"
        key = dg.AssetKey(path)
        since.update({dg.AssetCheckKey(key, c["name"]): latest_at_start[key] for c in checks})
    deadline = time.monotonic() + 600
    waiting = dict(since)
    while waiting and time.monotonic() < deadline:
        time.sleep(5)
        waiting = {c: at for c, at in waiting.items() if not resolved_since(stack_instance, c, at)}
    assert not waiting, (
        f"checks with no result for the latest materialization or a later one: {sorted(map(str, waiting))}"
    )


@pytest.mark.timeout(900)  # a check run a sensor asks for at most every 180 s under the test settings
def test_the_ui_shows_the_asset_sensor_and_the_check_runs_it_asked_for(
    settings, browser, stack_instance, latest_at_start
):
    """The sensor page names its monitored asset; the Iceberg orders page lists its checks; the conservation check's
    execution history links a run that evaluated a materialization recorded after the module began, a run of the
    streaming checks job that flink_job_sensor asked for after recording it (the tick itself evaluates nothing).
    That run is waited for in Dagster's records first (it only ever comes into being), then the page is read once.
    Screenshots kept."""
    base = f"http://{settings.host}:{settings.dagster_port}"
    page = open_page(
        browser,
        f"{base}/locations/lineage_assets/sensors/{SENSOR}",
        ARTIFACTS / "dagster-asset-sensor.png",
        "Monitored assets",
    )
    assert page.get_by_text("iceberg / default / orders", exact=False).count()
    page.close()

    conservation = dg.AssetCheckKey(dg.AssetKey(ORDERS), "conservation")
    latest = latest_at_start[conservation.asset_key]
    assert latest is not None, "the main run materialized the Iceberg orders"

    def by_the_sensor() -> list:
        return [
            r
            for r in resolved_since(stack_instance, conservation, latest + 1)
            if stack_instance.get_run_by_id(r.run_id).tags.get(REQUESTED_BY) == FLINK_SENSOR
        ]

    deadline = time.monotonic() + 540
    while not (executions := by_the_sensor()) and time.monotonic() < deadline:
        time.sleep(5)
    assert executions, f"no run that {FLINK_SENSOR} asked for evaluated a materialization newer than {latest}"
    execution = executions[0]  # the newest of them: the newest rows come first on the page
    run = stack_instance.get_run_by_id(execution.run_id)
    assert run.job_name == "streaming_lineage_checks"

    shot = ARTIFACTS / "dagster-asset-checks-iceberg-default-orders.png"
    page = open_page(browser, f"{base}/assets/{'/'.join(ORDERS)}?view=checks", shot, "Latest execution")
    try:
        body = page.inner_text("body")
        for check in (
            "conservation",
            "lineage_dataset_exists",
            "lineage_run_state_agrees",
            "flink_job_version_current",
        ):
            assert check in body, f"{check} is not listed; see {shot}"
        history = ARTIFACTS / "dagster-asset-check-history-iceberg-default-orders.png"
        page.get_by_text("Execution history", exact=True).first.click()
        link = page.locator(f"a[href^='/runs/{execution.run_id}']")
        link.first.wait_for(timeout=30_000)
        page.screenshot(path=history, full_page=True)
    finally:
        page.close()
