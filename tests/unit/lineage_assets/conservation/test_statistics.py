"""Statistics events: each rowCount is what the hop moved between two looks at the same run (figures by hand)."""

import datetime as dt
import json

from infra.settings import StackSettings
from lineage_assets.conservation.balance import HopBalance, OtherWriter
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.statistics import statistics_event
from lineage_assets.lineage.events import EventBuilder, to_json
from lineage_assets.lineage.identity import Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())
HOP = hops(PIPELINE)["iceberg-ingestion"]
RUN_1, RUN_2 = "0190f2a0-0000-7000-8000-000000000001", "0190f2a0-0000-7000-8000-000000000002"


def look(in_, out, dead, pending=0) -> HopBalance:
    return HopBalance(HOP.job.name, HOP.input.qualified_name, HOP.output_names, in_, out, dead, pending)


def datasets(event) -> dict[str, dict]:
    body = json.loads(to_json(event))
    return {
        d["name"]: {**d.get("inputFacets", {}), **d.get("outputFacets", {}), **d.get("facets", {})}
        for d in body["inputs"] + body["outputs"]
    }


def test_the_first_look_at_a_run_starts_its_period_and_the_next_one_reports_what_moved(tmp_path):
    counts, builder = CountStore(tmp_path / "c.sqlite"), EventBuilder(PIPELINE)
    assert statistics_event(builder, counts, HOP, RUN_1, look(1000, 990, 4, 6)) is None
    event = statistics_event(builder, counts, HOP, RUN_1, look(1500, 1480, 6, 14))
    assert event.eventType.value == "RUNNING" and event.run.runId == RUN_1
    found = datasets(event)
    assert found["orders"]["inputStatistics"]["rowCount"] == 500
    assert found["default/orders"]["outputStatistics"]["rowCount"] == 490
    assert found["orders-dlq-flink"]["outputStatistics"]["rowCount"] == 2
    assert [(a["assertion"], a["success"]) for a in found["orders"]["dataQualityAssertions"]["assertions"]] == [
        ("conservation: no record missing", True),
        ("conservation: no record doubled", True),
    ]
    # another run of the same job starts its own period
    assert statistics_event(builder, counts, HOP, RUN_2, look(1600, 1590, 6, 4)) is None


def test_a_loss_seen_once_sends_statistics_without_assertions_and_a_confirmed_one_fails_them(tmp_path):
    counts, builder = CountStore(tmp_path / "c.sqlite"), EventBuilder(PIPELINE)
    statistics_event(builder, counts, HOP, RUN_1, look(100, 100, 0))
    once = datasets(statistics_event(builder, counts, HOP, RUN_1, look(200, 190, 0), confirmed=False))
    assert "dataQualityAssertions" not in once["orders"]
    assert once["default/orders"]["outputStatistics"]["rowCount"] == 90
    confirmed = datasets(statistics_event(builder, counts, HOP, RUN_1, look(300, 290, 0)))
    assert [(a["success"], a["actual"]) for a in confirmed["orders"]["dataQualityAssertions"]["assertions"]] == [
        (False, "10"),
        (True, "0"),
    ]


def test_unknown_figures_send_nothing(tmp_path):
    counts, builder = CountStore(tmp_path / "c.sqlite"), EventBuilder(PIPELINE)
    unknown = HopBalance(HOP.job.name, "i", (), unknown="Kafka down")
    assert statistics_event(builder, counts, HOP, RUN_1, unknown) is None
    assert counts.facts("ol_statistics") == {}


def test_other_writers_and_their_acceptance_leave_the_jobs_rowcount_and_the_period_names_them(tmp_path):
    counts, builder = CountStore(tmp_path / "c.sqlite"), EventBuilder(PIPELINE)
    table = HOP.output.qualified_name
    t0, t1, t2 = (dt.datetime(2026, 11, 26, 3, m, tzinfo=dt.UTC) for m in (0, 5, 10))
    deleted = OtherWriter(table, "snapshot 7 (overwrite)", -10, "snapshot:7")
    # 1000 rows written by the job; then the job writes 400 more while someone deletes 10 of the table's rows
    first = HopBalance(HOP.job.name, "i", (), 1000, 1000, 0, 0, range={"snapshot": 1})
    statistics_event(builder, counts, HOP, RUN_1, first, now=t0)
    second = HopBalance(HOP.job.name, "i", (), 1400, 1390, 0, 0, range={"snapshot": 8}, other_writers=(deleted,))
    event = statistics_event(builder, counts, HOP, RUN_1, second, now=t1)
    assert datasets(event)["default/orders"]["outputStatistics"]["rowCount"] == 400
    period = json.loads(to_json(event))["run"]["facets"]["conservation_period"]
    assert (period["startTime"], period["endTime"]) == ("2026-11-26T03:00:00.000Z", "2026-11-26T03:05:00.000Z")
    assert (period["start"], period["end"]) == ({"snapshot": 1}, {"snapshot": 8})
    assert period["otherWriters"] == {table: -10}
    # the deletion accepted (its rows leave the balance: out reads 1400), nothing written since: rowCount 0
    accepted = second.with_accepted({"snapshot:7"})
    assert accepted.out == 1400
    third = statistics_event(builder, counts, HOP, RUN_1, accepted, now=t2)
    assert datasets(third)["default/orders"]["outputStatistics"]["rowCount"] == 0
    assert json.loads(to_json(third))["run"]["facets"]["conservation_period"]["otherWriters"] == {}
