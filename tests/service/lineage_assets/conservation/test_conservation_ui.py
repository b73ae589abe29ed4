"""The asset page shows the conservation check with its figures as metadata and plotted over time (Dagster plots a
check's numeric metadata under its Plots). Screenshot kept in tests/artifacts/."""

import time

import pytest

from tests.support.ui_pages import ARTIFACTS, open_page

pytestmark = pytest.mark.service

FIGURES = ("in", "out", "dead_letters", "pending", "missing", "duplicates")


def latest_execution_described(browser, url: str, shot) -> object:
    """The check's page once its latest execution carries a description: right after the sensor recorded a
    materialization whose hop it found busy, the latest materialization has no conservation result until the
    schedule's check run or the sensor's next tick evaluates it (within a quarter of the freshness window)."""
    deadline = time.monotonic() + 300
    while True:
        page = open_page(browser, url, shot, "Latest execution")
        if "iceberg-ingestion: " in page.inner_text("body") or time.monotonic() > deadline:
            return page
        page.close()
        time.sleep(15)


def test_the_asset_page_shows_the_conservation_check_and_its_plots(settings, browser, pipeline_ran):
    shot = ARTIFACTS / "dagster-conservation-check-iceberg-default-orders.png"
    url = f"{settings.dagster_url}/assets/iceberg/default/orders?view=checks&checkDetail=conservation"
    page = latest_execution_described(browser, url, shot)
    try:
        page.set_viewport_size({"width": 1600, "height": 1800})
        plots = page.get_by_text("Plots", exact=True).first
        plots.wait_for(timeout=30_000)
        plots.scroll_into_view_if_needed()
        page.get_by_text("conservation/in", exact=True).last.wait_for(timeout=30_000)
        page.wait_for_timeout(1_000)  # the charts draw after their data arrives
        page.screenshot(path=shot)
        body = page.inner_text("body")
        assert "iceberg-ingestion: " in body, f"the latest evaluation's description names the hop; see {shot}"
        section = body[body.index("Plots") :]
        for figure in FIGURES:
            assert f"conservation/{figure}" in section, f"no plot of conservation/{figure}; see {shot}"
        assert page.locator("canvas").count() >= len(FIGURES), f"the plots are not drawn; see {shot}"
    finally:
        page.close()
