"""What a person sees in the Dagster UI, in a real browser, after the main job: the streaming and batch asset
graphs, each output's freshness status on its asset page as the stack's daemon evaluated it (the main run leaves
every output fresh: the daemon's record must say PASS, read from the instance right before and after the page is
read, and the page must say "Passing"), and the new-orders sensor's ticks with the run it requested. Screenshots go
to tests/artifacts/.

Dagster OSS draws freshness on the asset page only: the graph's freshness facet reads asset health, which only
Dagster+ serves (``dagster_asset_health_queries_supported`` is False in OSS)."""

from __future__ import annotations

import contextlib
import re
import time
from urllib.parse import quote

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState  # not exported by dagster yet

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.main_job import BATCH_SENSOR
from lineage_assets.metadata import asset_key
from tests.support.ui_pages import ARTIFACTS, open_page

pytestmark = pytest.mark.service

FRESHNESS_KEYS = ("iceberg_orders", "kafka_supplier_stats", "archive_orders", "iceberg_supplier_stats")


def test_asset_pages_show_the_freshness_the_daemon_evaluated(settings, browser, stack_instance, pipeline_ran):
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


def freshness(instance, key: dg.AssetKey) -> FreshnessState | None:
    record = instance.get_freshness_state_records([key]).get(key)
    return record.freshness_state if record else None


def assert_page_says_passing(browser, instance, key: dg.AssetKey, url: str, timeout: float = 300.0) -> None:
    """The main run materialized every output and left the streaming jobs running: the daemon records each fresh
    (PASS), and while it does, before and after the page is read, the page says "Passing". On a shared, loaded stack
    the record may change while the page loads (a streaming output turns WARN half a window after its last
    materialization): then the page is read again once the record is PASS again, until the deadline."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    shot = ARTIFACTS / f"dagster-asset-{'-'.join(key.path)}.png"
    deadline = time.monotonic() + timeout
    while True:
        while freshness(instance, key) != FreshnessState.PASS:
            assert time.monotonic() < deadline, f"{key.to_user_string()}: the daemon never recorded it fresh"
            time.sleep(5)
        page = open_page(browser, url, shot, "Freshness policy")
        shown = page.get_by_text(re.compile("^Passing$"))
        with contextlib.suppress(PlaywrightTimeout):
            shown.first.wait_for(timeout=30_000)
        says_passing = shown.count() > 0
        page.close()
        if says_passing and freshness(instance, key) == FreshnessState.PASS:  # PASS before and after the read
            return
        # the record can flip to WARN and back between two daemon evaluations while the page loads (a caught-up
        # output is materialized every quarter of its window, and warns half a window after the last one): the
        # page then shows the WARN it had; read it again while the deadline allows
        assert time.monotonic() < deadline, (
            f"{key.to_user_string()}: the page never said Passing while the daemon recorded PASS; see {shot}"
        )
        time.sleep(5)


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
