"""Opening a page of a UI in the tests' browser (Playwright's Chromium) once it shows what the test reads, with a
screenshot kept in tests/artifacts/."""

from __future__ import annotations

from pathlib import Path

ARTIFACTS = Path(__file__).parents[1] / "artifacts"


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
