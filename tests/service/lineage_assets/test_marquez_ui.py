"""What a person sees in Marquez's web UI, in a real browser: the lineage page of Kafka `orders` draws every job of
the pipeline and both Iceberg tables, and the UI's own server proxies Marquez's API. The API tests prove Marquez
holds the graph; this proves the UI (its Node server, its bundle, its layout worker) actually draws it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from lineage_assets.lineage.identity import DAGSTER_JOB, Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient, lineage_page
from tests.service.lineage_assets.conftest import wait_for_batch_side

pytestmark = pytest.mark.service

SCREENSHOT = Path(__file__).parents[2] / "artifacts" / "marquez-orders-lineage.png"
#: hops from Kafka orders to Iceberg supplier_stats (orders > iceberg-ingestion > default/orders > Spark > table) + 1
DEPTH = 5
#: Marquez web 0.51.1 cuts node labels: truncateText(job.name, 16), truncateText(dataset.name, 15), adding "..."
JOB_LABEL, DATASET_LABEL = 16, 15


def shown(name: str, limit: int) -> str:
    """A node's label as the UI draws it."""
    return name if len(name) <= limit else name[:limit] + "..."


def wait_for_jobs(settings, names: set[str], timeout: float = 60) -> None:
    client, deadline = MarquezClient(settings.marquez_url), time.monotonic() + timeout
    while (missing := names - {j["name"] for j in client.jobs(settings.openlineage_namespace)}) and (
        time.monotonic() < deadline
    ):
        time.sleep(2)
    if missing:
        pytest.fail(f"Marquez has no jobs {sorted(missing)}: run the main pipeline first: lineage-lab pipeline run")


def test_orders_lineage_page_draws_the_pipeline(settings, browser, flink_jobs_run):
    pipeline = Pipeline.from_settings(settings)
    jobs = {name for name in pipeline.jobs if name != DAGSTER_JOB}  # the Dagster run job has no datasets to draw
    tables = [pipeline.dataset(k).name for k in ("iceberg_orders", "iceberg_supplier_stats")]
    wait_for_jobs(settings, jobs)
    wait_for_batch_side(settings)

    orders = pipeline.dataset("kafka_orders")
    url = lineage_page(settings.marquez_web_url, orders.namespace, orders.name, depth=DEPTH)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    try:
        page.goto(url, wait_until="networkidle")
        try:
            # node captions ("JOB"/"DATASET") are SVG text the UI renders only once its worker laid the graph out
            page.wait_for_selector("svg text:text-is('JOB')", timeout=30_000)
        finally:
            page.screenshot(path=SCREENSHOT, full_page=True)
        labels = set(page.locator("svg text").all_text_contents())
    finally:
        page.close()

    # Long names are cut, so assert the labels a user reads. Marquez files Spark's datasets on the action child jobs
    # (dagster.supplier_stats.overwrite_by_expression...), so "dagster.supplier..." is drawn for that child.
    expected = {shown(j, JOB_LABEL) for j in jobs} | {shown(t, DATASET_LABEL) for t in tables}
    assert expected <= labels, f"{url} does not show {sorted(expected - labels)}; see {SCREENSHOT}"


def test_ui_server_is_up_and_proxies_marquez(settings):
    health = requests.get(f"{settings.marquez_web_url}/healthcheck", timeout=10)
    assert (health.status_code, health.text) == (200, "OK")
    direct = set(MarquezClient(settings.marquez_url).namespaces())  # asked first: namespaces are only ever added
    resp = requests.get(f"{settings.marquez_web_url}/api/v1/namespaces", timeout=10)
    assert resp.status_code == 200, resp.text[:300]
    proxied = {n["name"] for n in resp.json()["namespaces"]}
    assert direct <= proxied
    kafka = Pipeline.from_settings(settings).dataset("kafka_orders").namespace
    assert {settings.openlineage_namespace, kafka} <= proxied
