"""scripts/test_reports.py: the end-of-run list of skipped tests and phases, from hand-written JUnit XML reports."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "test_reports.py"
_spec = importlib.util.spec_from_file_location("test_reports", SCRIPT)
assert _spec and _spec.loader
test_reports = importlib.util.module_from_spec(_spec)
sys.modules["test_reports"] = test_reports  # dataclasses look their module up
_spec.loader.exec_module(test_reports)

# what pytest --junitxml writes (trimmed): a skip's reason is the message, the text adds file and line
PYTEST_XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="2" tests="4">
  <testcase classname="tests.unit.infra.test_settings" name="test_defaults" time="0.01"/>
  <testcase classname="tests.service.infra.test_postgres" name="test_private_home" time="0.00">
    <skipped type="pytest.skip" message="only root starts PostgreSQL as the postgres OS user">
      tests/service/infra/test_postgres.py:31: only root starts PostgreSQL as the postgres OS user</skipped>
  </testcase>
  <testcase classname="tests.unit.x" name="test_param[a-b]" time="0.00">
    <skipped type="pytest.skip">tests/unit/x.py:3: only the text</skipped>
  </testcase>
  <testcase classname="tests.unit.y" name="test_broken" time="0.00"><failure message="assert 1 == 2"/></testcase>
</testsuite></testsuites>
"""

# what maven-surefire-plugin writes per test class (trimmed): a @Disabled test with and without a reason
SUREFIRE_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="lab.lineage.orders.OrderRuleTest" tests="3" errors="0" skipped="2" failures="0">
  <testcase name="acceptsValidOrder" classname="lab.lineage.orders.OrderRuleTest" time="0.01"/>
  <testcase name="later" classname="lab.lineage.orders.OrderRuleTest" time="0"><skipped message="issue 99"/></testcase>
  <testcase name="bare" classname="lab.lineage.orders.OrderRuleTest" time="0"><skipped/></testcase>
</testsuite>
"""

SUREFIRE_PASSING = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="lab.lineage.orders.OrderDecoderTest" tests="2">
  <testcase name="decodes" classname="lab.lineage.orders.OrderDecoderTest"/>
  <testcase name="rejects" classname="lab.lineage.orders.OrderDecoderTest"/>
</testsuite>
"""


def run(fn, *args, **kwargs) -> tuple[int, list[str]]:
    lines: list[str] = []
    status = fn(*args, out=lines.append, **kwargs)
    return status, lines


def phases(reports: Path, *rows: str) -> None:
    (reports / "phases.tsv").write_text("".join(row.replace("|", "\t") + "\n" for row in rows))


def test_pytest_report_counts_cases_and_keeps_each_skip_reason(tmp_path: Path) -> None:
    (tmp_path / "all.xml").write_text(PYTEST_XML)
    report = test_reports.read_report(tmp_path / "all.xml")
    assert (report.label, report.tests, report.failures, report.errors) == ("all", 4, 1, 0)
    assert [str(s) for s in report.skips] == [
        "tests.service.infra.test_postgres::test_private_home: only root starts PostgreSQL as the postgres OS user",
        "tests.unit.x::test_param[a-b]: tests/unit/x.py:3: only the text",
    ]


def test_unreadable_report_is_said_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "unit.xml").write_text("<testsuites><testsuite>")  # a run killed while writing
    assert "unit.xml" in test_reports.read_report(tmp_path / "unit.xml").unreadable


def test_summary_says_none_when_nothing_skipped(tmp_path: Path) -> None:
    (tmp_path / "unit.xml").write_text(PYTEST_XML.replace("<skipped", "<ignored").replace("</skipped>", "</ignored>"))
    phases(tmp_path, "unit|pending", "compose|pending", "unit|running", "unit|passed", "compose|passed")
    status, lines = run(test_reports.summary, tmp_path, ci=True)
    assert status == 0
    assert lines[-1] == "skipped: none"
    assert "  unit: 4 tests, 1 failures, 0 errors, 0 skipped" in lines


def test_summary_lists_pytest_and_surefire_skips_and_phases_not_run(tmp_path: Path) -> None:
    (tmp_path / "all.xml").write_text(PYTEST_XML)
    module = tmp_path / "junit" / "order-functions"
    module.mkdir(parents=True)
    (module / "TEST-lab.lineage.orders.OrderRuleTest.xml").write_text(SUREFIRE_XML)
    (module / "TEST-lab.lineage.orders.OrderDecoderTest.xml").write_text(SUREFIRE_PASSING)
    phases(
        tmp_path,
        *("all|pending", "after_suite|pending", "junit|pending", "stack|pending", "compose|pending"),
        "compose|off|LINEAGE_LAB_COMPOSE=skip",
        *("junit|running", "junit|passed", "stack|running", "all|running"),
    )
    status, lines = run(test_reports.summary, tmp_path, exit_status=1)
    assert status == 0  # the run's own status already says it failed; the list only informs
    assert "  junit/order-functions: 5 tests, 2 skipped" in lines
    assert lines[lines.index("skipped: 4 test(s); phases not run: 4") :][1:] == [
        "  [all] tests.service.infra.test_postgres::test_private_home: only root starts PostgreSQL as the postgres"
        " OS user",
        "  [all] tests.unit.x::test_param[a-b]: tests/unit/x.py:3: only the text",
        "  [junit/order-functions] lab.lineage.orders.OrderRuleTest::later: issue 99",
        "  [junit/order-functions] lab.lineage.orders.OrderRuleTest::bare: no reason given",
        "  phase all: did not finish (the run ended with exit status 1 in it)",
        "  phase after_suite: not reached (the run ended earlier, exit status 1)",
        "  phase stack: did not finish (the run ended with exit status 1 in it)",
        "  phase compose: left out on purpose (LINEAGE_LAB_COMPOSE=skip)",
    ]


def test_ci_fails_on_a_skip_no_expected_pattern_matches(tmp_path: Path) -> None:
    (tmp_path / "all.xml").write_text(PYTEST_XML)
    expected = tmp_path / "expected-skips"
    expected.write_text("# comment\nonly root starts PostgreSQL\n")
    status, lines = run(test_reports.summary, tmp_path, ci=True, expected=expected)
    assert status == 1
    assert any(line.startswith("  [all] tests.unit.x::test_param[a-b]") and "<- unexpected" in line for line in lines)
    assert not any("test_private_home" in line and "unexpected" in line for line in lines)
    assert lines[-1].startswith("CI: 1 unexpected skipped test(s)")

    expected.write_text("only root starts PostgreSQL\nonly the text$\n")
    assert run(test_reports.summary, tmp_path, ci=True, expected=expected)[0] == 0
    assert run(test_reports.summary, tmp_path, ci=False)[0] == 0  # outside CI: listed, never failing


def test_ci_fails_on_a_phase_that_could_not_run_but_not_on_one_left_out(tmp_path: Path) -> None:
    phases(tmp_path, "compose|skipped|no docker command and not root")
    status, lines = run(test_reports.summary, tmp_path, ci=True)
    assert status == 1
    assert "  phase compose: could not run: no docker command and not root" in lines

    phases(tmp_path, "compose|off|LINEAGE_LAB_COMPOSE=skip")
    assert run(test_reports.summary, tmp_path, ci=True)[0] == 0


@pytest.mark.parametrize(
    ("files", "status", "says"),
    [
        ({"TEST-a.xml": SUREFIRE_PASSING}, 0, "2 tests run, 0 failures, 0 errors, 0 skipped"),
        (
            {"TEST-a.xml": SUREFIRE_XML, "TEST-b.xml": SUREFIRE_PASSING},
            0,
            "5 tests run, 0 failures, 0 errors, 2 skipped",
        ),
        ({}, 1, "NO TESTS RAN"),
        (
            {"TEST-a.xml": SUREFIRE_PASSING.replace("/>\n  <testcase", "><failure/></testcase>\n  <testcase", 1)},
            1,
            "FAILED",
        ),
    ],
)
def test_junit_copies_and_counts_each_module(tmp_path: Path, files: dict[str, str], status: int, says: str) -> None:
    module = tmp_path / "flink_jobs" / "order-functions"
    surefire = module / "target" / "surefire-reports"
    surefire.mkdir(parents=True)
    for name, text in files.items():
        (surefire / name).write_text(text)
    (surefire / "lab.lineage.orders.OrderRuleTest.txt").write_text("not a report")
    reports = tmp_path / "reports"
    got, lines = run(test_reports.junit, reports, [module])
    assert got == status
    assert lines[0].startswith(f"  {module}: ") and says in lines[0]
    assert sorted(p.name for p in (reports / "junit" / "order-functions").iterdir()) == sorted(files)


def test_summary_gives_each_phase_its_time_from_running_to_its_last_line(tmp_path: Path) -> None:
    phases(
        tmp_path,
        *("unit|pending||1000", "service|pending||1000", "compose|pending||1000"),
        *("unit|running||1010", "unit|passed||1100"),  # 90 s
        *("service|running||1100", "service|running||1130", "service|passed||2900"),  # 1800 s: from its first line
        "compose|off|LINEAGE_LAB_COMPOSE=skip|2900",  # never ran: no time
    )
    status, lines = run(test_reports.summary, tmp_path)
    assert status == 0
    assert lines[: lines.index(f"== test reports ({tmp_path})")] == [
        "== phase times",
        "  unit              90 s    1.5 min  passed",
        "  service         1800 s   30.0 min  passed",
        "  whole run       1890 s   31.5 min",
    ]


def test_the_whole_run_counts_phases_that_overlap_once(tmp_path: Path) -> None:
    phases(
        tmp_path,
        *("unit|running||1010", "unit|passed||1100"),  # 90 s
        *("junit|running||1010", "junit|passed||1500"),  # 490 s, in the background beside unit and service
        *("service|running||1100", "service|passed||2900"),  # 1800 s
    )
    status, lines = run(test_reports.summary, tmp_path)
    assert status == 0
    assert lines[4] == "  whole run       1890 s   31.5 min"  # 1010 to 2900, not 90 + 490 + 1800


def test_phases_written_without_times_give_no_phase_times(tmp_path: Path) -> None:
    phases(tmp_path, "unit|running", "unit|passed")
    lines = run(test_reports.summary, tmp_path)[1]
    assert "== phase times" not in lines
