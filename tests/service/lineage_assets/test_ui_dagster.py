"""What a person sees in the Dagster UI, in a real browser, after the main job: the streaming and batch asset
graphs, each output's freshness status on its asset page as the stack's daemon evaluated it, and the new-orders
sensor's ticks with the run it requested. Screenshots go to tests/artifacts/.

Dagster OSS draws freshness on the asset page only: the graph's freshness facet reads asset health, which only
Dagster+ serves (``dagster_asset_health_queries_supported`` is False in OSS)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState  # not exported by dagster yet

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.main_run import BATCH_SENSOR
from lineage_assets.metadata import asset_key

pytestmark = pytest.mark.service

ARTIFACTS = Path(__file__).parents[2] / "artifacts"
#: how the asset page words each freshness state
SHOWN = {FreshnessState.PASS: "Passing", FreshnessState.WARN: "Warning", FreshnessState.FAIL: "Failed"}
FRESHNESS_KEYS = ("iceberg_orders", "kafka_supplier_stats", "archive_orders", "iceberg_supplier_stats")


def open_page(browser, url: str, screenshot: Path, ready: str):
    """The page at ``url`` once ``ready`` text shows (the first visit's community dialog skipped); screenshot kept."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(url, wait_until="networkidle")
    skip = page.get_by_role("button", name="Skip")
    if skip.count():
        skip.first.click()
    try:
        page.get_by_text(ready, exact=False).first.wait_for(timeout=30_000)
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=screenshot, full_page=True)
    return page


def test_asset_pages_show_the_freshness_the_daemon_evaluated(settings, browser, stack_instance):
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
    states = stack_instance.get_freshness_state_records(keys)
    missing = [k.to_user_string() for k in keys if k not in states]
    assert not missing, f"the daemon has evaluated no freshness for {missing}: run `lineage-lab pipeline run` first"
    for key in keys:
        wanted = SHOWN.get(states[key].freshness_state)
        assert wanted, f"{key.to_user_string()}: {states[key].freshness_state}"
        shot = ARTIFACTS / f"dagster-asset-{'-'.join(key.path)}.png"
        before = SHOWN[stack_instance.get_freshness_state_records([key])[key].freshness_state]
        page = open_page(browser, f"{base}/assets/{'/'.join(key.path)}", shot, "Freshness policy")
        # the daemon may re-evaluate while the page loads: the page shows the state held before or after
        after = SHOWN[stack_instance.get_freshness_state_records([key])[key].freshness_state]
        shown = page.get_by_text(re.compile(f"^({before}|{after})$"))
        shown.first.wait_for(timeout=30_000)
        assert shown.count(), f"{key.to_user_string()}: the page says neither {before} nor {after}; see {shot}"
        page.close()


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
