"""Opening a page of a UI in the tests' browser (Playwright's Chromium) once it shows what the test reads, with a
screenshot kept in tests/artifacts/."""

from __future__ import annotations

from pathlib import Path

ARTIFACTS = Path(__file__).parents[1] / "artifacts"


#: Dagster's UI opens a "Join the Dagster community" dialog over the page a second after it renders, until it is
#: dismissed in the browser (this localStorage key, JSON) or on the server. Looking for its Skip button raced that
#: second (CI at e0104ff: no dialog yet, so every later page had it). Each page starts as a browser that dismissed it.
DAGSTER_COMMUNITY_DIALOG_DISMISSED = "window.localStorage.setItem('communityNux', JSON.stringify('1'));"


def open_page(browser, url: str, screenshot: Path, ready: str):
    """The page at ``url`` once ``ready`` text shows (Dagster's community dialog dismissed); screenshot kept."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.add_init_script(DAGSTER_COMMUNITY_DIALOG_DISMISSED)
    page.goto(url, wait_until="networkidle")
    try:
        page.get_by_text(ready, exact=False).first.wait_for(timeout=30_000)
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=screenshot, full_page=True)
    return page
