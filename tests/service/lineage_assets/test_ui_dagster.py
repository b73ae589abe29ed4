"""What a person sees in the Dagster UI, in a real browser, after the main job: the streaming and batch asset
graphs, each output's freshness status on its asset page as the stack's daemon evaluated it (the main run leaves
every output fresh: the daemon's record says PASS; the page, read once between two reads of that record, says the
state the record held in between), and the new-orders sensor's ticks with the run it requested. Screenshots go
to tests/artifacts/.

Dagster OSS draws freshness on the asset page only: the graph's freshness facet reads asset health, which only
Dagster+ serves (``dagster_asset_health_queries_supported`` is False in OSS)."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState, FreshnessStateRecord  # not exported by dagster yet
from dagster._core.events import DagsterEventType

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.main_job import BATCH_SENSOR
from lineage_assets.metadata import asset_key
from tests.support.ui_pages import ARTIFACTS, open_page

pytestmark = pytest.mark.service

FRESHNESS_KEYS = ("iceberg_orders", "kafka_supplier_stats", "archive_orders", "iceberg_supplier_stats")


def test_asset_pages_show_the_freshness_the_daemon_evaluated(settings, browser, stack_instance, flink_jobs_run):
    pipeline = Pipeline.from_settings(settings)
    base = f"http://{settings.host}:{settings.dagster_port}"
    for group in ("streaming", "batch"):
        page = open_page(
            browser,
            f"{base}/locations/lineage_assets/asset-groups/{group}/lineage",
            ARTIFACTS / f"dagster-{group}-asset-graph.png",
            "Latest event",
        )
        page.close()
    keys = [asset_key(pipeline.dataset(k)) for k in FRESHNESS_KEYS]
    for key in keys:
        assert_page_says_passing(browser, stack_instance, key, f"{base}/assets/{'/'.join(key.path)}")


#: what the asset page's freshness section says for each state the daemon records, written out by hand from Dagster
#: webserver 1.13's bundle (the asset health statuses' second text: HEALTHY, WARNING, DEGRADED, UNKNOWN)
PAGE_SAYS = {
    FreshnessState.PASS: "Passing",
    FreshnessState.WARN: "Warning",
    FreshnessState.FAIL: "Failed",
    FreshnessState.UNKNOWN: "Not evaluated",
}
LABEL = re.compile("^(Passing|Warning|Failed|Not evaluated)$")


def freshness(instance, key: dg.AssetKey) -> FreshnessStateRecord | None:
    return instance.get_freshness_state_records([key]).get(key)


def states_in_effect(instance, key: dg.AssetKey, before: FreshnessStateRecord, after: FreshnessStateRecord) -> set:
    """Every state the daemon's record of ``key`` held between two reads of it: the record changes only with a
    FRESHNESS_STATE_CHANGE event (its ``updated_at`` is the change's time), so the states are the first read's and
    those of the changes logged after it."""
    if after.updated_at == before.updated_at:
        return {before.freshness_state}
    changes = instance.event_log_storage.get_event_records(
        dg.EventRecordsFilter(
            event_type=DagsterEventType.FRESHNESS_STATE_CHANGE,
            asset_key=key,
            after_timestamp=before.updated_at.timestamp(),
        ),
        limit=100,
    )
    return {before.freshness_state, after.freshness_state} | {
        c.event_log_entry.dagster_event.event_specific_data.new_state for c in changes
    }


def assert_page_says_passing(browser, instance, key: dg.AssetKey, url: str, timeout: float = 300.0) -> None:
    """The main run materialized every output and left the streaming jobs running: the daemon records each fresh
    (PASS; waited for, the deadline a failure detector). Then the page is read once, between two reads of the
    daemon's record: it must say what the record said in between. A streaming output can turn WARN half a window
    after its last materialization while the page loads; the page then may say either, and nothing else."""
    shot = ARTIFACTS / f"dagster-asset-{'-'.join(key.path)}.png"
    deadline = time.monotonic() + timeout
    while (before := freshness(instance, key)) is None or before.freshness_state != FreshnessState.PASS:
        assert time.monotonic() < deadline, f"{key.to_user_string()}: the daemon never recorded it fresh ({before})"
        time.sleep(5)
    page = open_page(browser, url, shot, "Freshness policy")
    # the section's heading shows before its status has loaded (a placeholder bar until then): wait for the status,
    # a change the page makes once
    page.get_by_text(LABEL).first.wait_for(timeout=30_000)
    section = page.locator("div").filter(has=page.get_by_text("Freshness policy", exact=True))
    section = section.filter(has=page.get_by_text(LABEL)).last  # the innermost: the header and its status
    shown = section.get_by_text(LABEL).all_text_contents() if section.count() else []
    page.close()
    after = freshness(instance, key)
    assert after is not None
    expected = sorted(PAGE_SAYS[state] for state in states_in_effect(instance, key, before, after))
    assert len(shown) == 1 and shown[0] in expected, (
        f"{key.to_user_string()}: the page's freshness section says {shown}, the daemon's record said {expected} "
        f"while it was read; see {shot}"
    )


def test_the_sensor_and_the_runs_it_requested_are_shown(settings, browser, stack_instance):
    runs = stack_instance.get_runs(filters=dg.RunsFilter(tags={"dagster/sensor_name": BATCH_SENSOR}), limit=1)
    assert runs, f"{BATCH_SENSOR} has requested no run yet: run `lineage-lab pipeline run` first"
    base = f"http://{settings.host}:{settings.dagster_port}"
    page = open_page(
        browser, f"{base}/locations/lineage_assets/sensors/{BATCH_SENSOR}", ARTIFACTS / "dagster-sensor.png", "Running"
    )
    page.close()
    shot = ARTIFACTS / "dagster-sensor-run-requests.png"
    page = open_page(
        browser, f"{base}/runs?q%5B0%5D={quote(f'tag:dagster/sensor_name={BATCH_SENSOR}', safe='')}", shot, "partition"
    )
    newest = page.get_by_text(runs[0].run_id[:8], exact=True)
    assert newest.count(), f"run {runs[0].run_id} requested by {BATCH_SENSOR} is not listed; see {shot}"
    assert page.get_by_text(f"partition: {runs[0].tags['dagster/partition']}", exact=True).count(), shot
    page.close()
