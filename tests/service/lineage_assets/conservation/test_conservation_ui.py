"""The asset page shows the conservation check's latest execution as the stack's Dagster recorded it: its
description, its result and its figures as metadata, plotted over time (Dagster plots a check's numeric metadata
under its Plots), for Iceberg orders and for supplier-stats, whose check also weighs total_price against the sum of
price (its value figures plotted beside the counts). Screenshots kept in tests/artifacts/.

What the page shows moves while data flows: the Flink job sensor records a materialization of the Iceberg table
every tick and asks for check runs, and the checks schedule runs every few minutes. So both are stopped while the page
is read, once no check run is left in flight.

The page shows the execution that evaluated the latest materialization, and "Not evaluated" when there is none: the
sensor asks for check runs at most once a minute, so the materialization it recorded last may still be owed one when
it stops. The test therefore launches the checks job itself, as the schedule would, with a run id of its own; the
latest execution is then that run's, of the latest materialization (both read from the instance), and the page is
judged against it once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pytest

from tests.support.check_runs import run_the_checks_job, wait_for_check_runs_to_end
from tests.support.engine_waits import wait_for_ticks_to_end
from tests.support.stack_dagster import start_schedule, start_sensor, stop_schedule, stop_sensor
from tests.support.ui_pages import ARTIFACTS, open_page

pytestmark = pytest.mark.service

FIGURES = ("in", "out", "dead_letters", "pending", "missing", "duplicates")
CHECK = dg.AssetCheckKey(dg.AssetKey(["iceberg", "default", "orders"]), "conservation")
#: supplier-stats' check weighs total_price against the sum of price: its value figures, plotted too
VALUES_CHECK = dg.AssetCheckKey(dg.AssetKey(["kafka", "supplier_stats"]), "conservation")
VALUE_FIGURES = ("in", "out", "dead_letters", "pending", "difference")
#: what asks for runs of the streaming checks, and their job, written out by hand
FLINK_SENSOR = "flink_job_sensor"
CHECKS_SCHEDULE = "streaming_lineage_checks_schedule"


@contextmanager
def checks_held(settings) -> Iterator[None]:
    """The Flink job sensor and the checks schedule off inside the block, on again after it; the sensor's tick in
    flight at the stop has ended before the block begins (it would still ask for a check run)."""
    stop_sensor(settings, FLINK_SENSOR)
    try:
        wait_for_ticks_to_end(settings, FLINK_SENSOR)
        stop_schedule(settings, CHECKS_SCHEDULE)
        try:
            yield
        finally:
            start_schedule(settings, CHECKS_SCHEDULE)
    finally:
        start_sensor(settings, FLINK_SENSOR)


def latest_execution(instance: dg.DagsterInstance, check: dg.AssetCheckKey = CHECK):
    (record,) = instance.event_log_storage.get_asset_check_execution_history(check, limit=1)
    return record


def read_plots(browser, url: str, shot, last_figure: str, charts: int, height: int) -> tuple[str, int]:
    """A check's page scrolled to its plots once ``last_figure``'s and ``charts`` charts are drawn, screenshot kept:
    (the page's text, the charts drawn)."""
    page = open_page(browser, url, shot, "Latest execution")
    try:
        page.set_viewport_size({"width": 1600, "height": height})
        plots = page.get_by_text("Plots", exact=True).first
        plots.wait_for(timeout=30_000)
        plots.scroll_into_view_if_needed()
        page.get_by_text(last_figure, exact=True).last.wait_for(timeout=30_000)
        page.locator("canvas").nth(charts - 1).wait_for(timeout=30_000)  # a chart per figure
        page.screenshot(path=shot, full_page=True)
        return page.inner_text("body"), page.locator("canvas").count()
    finally:
        page.close()


def test_the_asset_page_shows_the_conservation_check_and_its_plots(settings, browser, stack_instance, pipeline_ran):
    shot = ARTIFACTS / "dagster-conservation-check-iceberg-default-orders.png"
    url = f"{settings.dagster_url}/assets/iceberg/default/orders?view=checks&checkDetail=conservation"
    with checks_held(settings):
        wait_for_check_runs_to_end(stack_instance)
        run_id = run_the_checks_job(settings, stack_instance)
        before = latest_execution(stack_instance)
        latest_materialization = stack_instance.fetch_materializations(CHECK.asset_key, limit=1).records[0]
        body, canvases = read_plots(browser, url, shot, "conservation/in", len(FIGURES), 1800)
        after = latest_execution(stack_instance)
        values_shot = ARTIFACTS / "dagster-conservation-values-kafka-supplier-stats.png"
        values_execution = latest_execution(stack_instance, VALUES_CHECK)
        values_url = f"{settings.dagster_url}/assets/kafka/supplier_stats?view=checks&checkDetail=conservation"
        values_body, values_canvases = read_plots(
            browser,
            values_url,
            values_shot,
            "conservation/values/total_price/difference",
            len(FIGURES) + len(VALUE_FIGURES),
            2600,
        )
        assert latest_execution(stack_instance, VALUES_CHECK).id == values_execution.id
    assert after.id == before.id, "nothing evaluated the check while its sensor and schedule were stopped"
    evaluation = before.event.dagster_event.event_specific_data
    assert isinstance(evaluation, dg.AssetCheckEvaluation), f"the latest execution is not resolved: {before}"
    assert before.run_id == run_id, f"the latest execution is run {before.run_id}'s, not the one launched"
    target = evaluation.target_materialization_data
    assert target and target.storage_id == latest_materialization.storage_id, "not of the latest materialization"
    assert evaluation.description.startswith("iceberg-ingestion: "), evaluation.description
    latest = body[body.index("Latest execution") :]
    assert latest.startswith(f"Latest execution\n\n{evaluation.description}\n"), f"see {shot}"
    result = "Passed" if evaluation.passed else "Failed"
    assert f"Evaluation result\n{result}\n" in latest, f"the page does not say {result}; see {shot}"
    section = body[body.index("Plots") :]
    for figure in FIGURES:
        assert f"conservation/{figure}" in section, f"no plot of conservation/{figure}; see {shot}"
    assert canvases >= len(FIGURES), f"the plots are not drawn; see {shot}"

    # supplier-stats' check, evaluated by the same run: its value balance in the description and plotted
    assert values_execution.run_id == run_id, f"supplier-stats' latest execution is run {values_execution.run_id}'s"
    values_evaluation = values_execution.event.dagster_event.event_specific_data
    assert "values: total_price (sum of price): in " in values_evaluation.description, values_evaluation.description
    assert values_evaluation.metadata["values"].value["total_price"]["source"] == "price"
    latest = values_body[values_body.index("Latest execution") :]
    assert latest.startswith(f"Latest execution\n\n{values_evaluation.description}\n"), f"see {values_shot}"
    section = values_body[values_body.index("Plots") :]
    for figure in VALUE_FIGURES:
        assert f"conservation/values/total_price/{figure}" in section, (
            f"no plot of the {figure} value; see {values_shot}"
        )
    assert values_canvases >= len(FIGURES) + len(VALUE_FIGURES), f"the plots are not drawn; see {values_shot}"
