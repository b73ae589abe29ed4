"""Sanity of the tests (issue 38): break the product in ten realistic ways, one at a time, and name the test that fails.

Each breakage is one exact text replacement in one product file (conservation, engine truth, lineage). The script
applies it to the working tree, runs the breakage's unit selection in a fresh pytest process (the node ids expected
to catch it; the failing ones are read from a ``--junitxml`` report), and puts the file back byte for byte (its
modification time too) whatever happens. A breakage none of its tests catches is reported ``SURVIVED``: a gap in
the tests, or a breakage that changes nothing.

    .venv/bin/python scripts/sanity.py                 # every breakage against its unit tests
    .venv/bin/python scripts/sanity.py --only C1 E2    # some of them
    .venv/bin/python scripts/sanity.py --service       # also their service tests (needs `lineage-lab stack up`)

It refuses to run when a target file has uncommitted changes (it could not tell a breakage from them), when a
breakage's text is not in its file exactly once (the table is stale), or when the selected tests do not all pass on
the unbroken product first. Exit status: 0 when every breakage was caught, 1 when one survived, 2 when it refused.
The product is only ever edited as text: nothing of it is imported here.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
#: a pytest run of one selection that takes longer than this is stopped (each test has its own 60 s limit too)
RUN_TIMEOUT_S = 900

Area = Literal["conservation", "engine truth", "lineage"]

UNIT = "tests/unit/lineage_assets"
SERVICE = "tests/service/lineage_assets"


@dataclass(frozen=True)
class Breakage:
    """One way to break the product: ``old`` (exactly once in ``file``) becomes ``new``."""

    id: str
    area: Area
    file: str  # relative to the repository root
    what: str  # what it breaks, in words
    old: str
    new: str
    #: unit tests expected to fail (pytest node ids): the selection run for this breakage
    unit: tuple[str, ...]
    #: service tests that would fail too (they need the stack: run only with --service)
    service: tuple[str, ...] = ()


BREAKAGES: tuple[Breakage, ...] = (
    # --- conservation -------------------------------------------------------------------------------------------
    Breakage(
        "C1",
        "conservation",
        "lineage_assets/conservation/archive_walk.py",
        "off by one: an archive object that starts exactly where the sink's chain of objects ends is left out of "
        "the chain, so a copy overlapping it is taken for the sink's object and the sink's own object is named the "
        "extra one (the wrong object to delete)",
        "if o.start >= pos:",
        "if o.start > pos:",
        (
            f"{UNIT}/conservation/test_archive.py::test_copy_with_another_start_inside_the_records_is_extra",
            f"{UNIT}/conservation/test_archive.py::test_overlap_covering_a_hole_holds_what_the_hole_lacks",
            f"{UNIT}/conservation/test_archive.py::test_every_record_is_accounted_once",
        ),
    ),
    Breakage(
        "C2",
        "conservation",
        "lineage_assets/conservation/iceberg_snapshots.py",
        "dropped term: a snapshot's net rows forget the position deletes it removed, so a compaction that applies "
        "them reads as another writer deleting rows",
        '        - summary_int(summary, "added-position-deletes")\n'
        '        + summary_int(summary, "removed-position-deletes")\n',
        '        - summary_int(summary, "added-position-deletes")\n',
        (f"{UNIT}/conservation/test_iceberg_ingestion_hop.py::test_net_rows_counts_records_and_position_deletes",),
    ),
    Breakage(
        "C3",
        "conservation",
        "lineage_assets/conservation/balance.py",
        "an acceptance covers more than it was given: a writer whose change grew past the accepted position is "
        "still taken out of the figures, its later, unreviewed rows with it",
        "return w.reference in covered and covered[w.reference] in (None, w.position)",
        "return w.reference in covered",
        (
            f"{UNIT}/conservation/test_acceptances.py::test_an_acceptance_does_not_cover_a_writer_grown_past_its_position",
        ),
    ),
    Breakage(
        "C4",
        "conservation",
        "lineage_assets/conservation/window_tail.py",
        "off by one, a loss read as pending: an order whose window ends with the newest fired window (the job's "
        "clock passed it) but never fired stays pending instead of showing as missing",
        "if fired_through is not None and window_end(start_ms) - 1 <= fired_through:",
        "if fired_through is not None and window_end(start_ms) <= fired_through:",
        (
            f"{UNIT}/conservation/test_supplier_windows.py::test_a_second_run_decodes_only_new_orders_and_settles_the_remembered_ones",
        ),
    ),
    # --- engine truth -------------------------------------------------------------------------------------------
    Breakage(
        "E1",
        "engine truth",
        "lineage_assets/checks/compare.py",
        "a stopped job read as running: check (d) takes a PAUSED connector for a running one, so it passes a paused "
        "connector whose run was left RUNNING and fails one whose run the sensor rightly closed",
        '"GONE", "PAUSED", "STOPPED"',
        '"GONE", "STOPPED"',
        (
            f"{UNIT}/checks/test_compare.py::test_a_paused_stopped_or_deleted_connector_is_stopped_and_its_run_must_be_closed",
        ),
    ),
    Breakage(
        "E2",
        "engine truth",
        "lineage_assets/flink/runs.py",
        "what runs: a Flink job that is gone (its cluster down, the job unknown or superseded) no longer closes its "
        "run, which stays RUNNING in Marquez",
        ', "GONE": RunState.ABORT}',
        "}",
        (f"{UNIT}/test_flink_runs.py::test_each_way_of_stopping_ends_the_same_run",),
        (f"{SERVICE}/test_flink_pipeline.py::test_the_sensor_ends_both_runs_when_the_cluster_stops",),
    ),
    Breakage(
        "E3",
        "engine truth",
        "lineage_assets/lineage/account.py",
        "what a job reads and writes: a declared dataset the engine no longer reads or writes is never named (the "
        "missing side is compared with the declaration itself)",
        "missing = [d for d in want if d.physical not in have_keys]",
        "missing = [d for d in want if d.physical not in want_keys]",
        (
            f"{UNIT}/lineage/test_account.py::test_a_missing_output_and_a_loopback_spelling",
            f"{UNIT}/flink/test_job_lineage.py::test_the_listener_names_what_supplier_stats_writes_and_the_check_names_the_difference",
        ),
        (
            f"{SERVICE}/test_observed_lineage.py::test_supplier_stats_restarted_with_another_sink_topic_shows_in_marquez_the_check_and_verify",
        ),
    ),
    # --- lineage ------------------------------------------------------------------------------------------------
    Breakage(
        "L1",
        "lineage",
        "lineage_assets/lineage/identity.py",
        "wrong identity string: Iceberg orders' catalog name (its symlink) loses its database, so the table the "
        "Flink listener names by catalog is no longer the declared dataset and the graph splits",
        'symlinks=(Symlink(catalog, "default.orders"),),',
        'symlinks=(Symlink(catalog, "orders"),),',
        (
            f"{UNIT}/checks/test_compare.py::test_an_iceberg_table_named_by_its_catalog_name_is_a_second_identity",
            f"{UNIT}/checks/test_compare.py::test_an_undeclared_name_sharing_the_current_version_in_marquez_is_a_second_identity",
            f"{UNIT}/lineage/test_events.py::test_output_carries_schema_symlink_datasource_and_column_lineage",
            f"{UNIT}/lineage/test_identity.py::test_any_producer_spelling_resolves_to_the_same_dataset",
            f"{UNIT}/lineage/test_impact.py::test_a_name_a_key_an_asset_key_or_a_catalog_name_resolve_to_one_dataset",
            f"{UNIT}/lineage/test_impact.py::test_an_unknown_column_or_dataset_says_what_exists",
            f"{UNIT}/flink/test_job_lineage.py::test_a_catalog_table_of_the_listener_is_named_after_the_plans_catalog_and_columns_come_from_the_plan",
            f"{UNIT}/flink/test_job_lineage.py::test_without_the_listener_the_plans_tables_name_the_datasets",
        ),
        (
            f"{SERVICE}/test_main_job.py::test_the_graph_in_marquez_is_the_reference_graph",
            f"{SERVICE}/test_main_job.py::test_iceberg_orders_is_one_node_written_by_ingestion_and_read_by_spark",
            f"{SERVICE}/test_iceberg_ingestion.py::test_manual_lineage_names_the_table_spark_reads",
        ),
    ),
    Breakage(
        "L2",
        "lineage",
        "lineage_assets/lineage/identity.py",
        "a column edge lost: supplier-stats' total_price no longer derives from orders.price, so the impact of "
        "orders.price stops before the windows",
        '"total_price": (ColumnSource("kafka_orders", "price", "DIRECT", "AGGREGATION"),),\n',
        "",
        (
            f"{UNIT}/checks/test_compare.py::test_a_column_read_downstream_that_is_gone_or_retyped_upstream_fails_the_readers",
            f"{UNIT}/checks/test_drift_report.py::test_the_whole_pipeline_has_no_drift_and_every_column_edge",
            f"{UNIT}/checks/test_drift_report.py::test_a_missing_and_an_extra_column_edge_are_drift",
            f"{UNIT}/checks/test_drift_report.py::test_before_the_source_has_currency_its_edges_wait_instead_of_drifting",
            f"{UNIT}/checks/test_drift_report.py::test_a_spark_applications_child_jobs_carry_its_datasets_and_spark_type_names_match",
            f"{UNIT}/lineage/test_account.py::test_declared_columns_fill_in_only_on_declared_outputs_and_say_so",
            f"{UNIT}/lineage/test_account.py::test_events_carry_the_account_and_say_per_column_where_the_lineage_comes_from",
            f"{UNIT}/lineage/test_identity.py::test_column_lineage_names_real_columns",
            f"{UNIT}/flink/test_job_lineage.py::test_the_declared_job_agrees_with_itself_and_keeps_its_columns_marked_declared",
        ),
        (
            f"{SERVICE}/test_impact.py::test_marquez_holds_the_reference_flow_downstream_of_orders_price",
            f"{SERVICE}/test_impact.py::test_the_cli_prints_the_reference_flow_downstream_of_orders_price",
            f"{SERVICE}/test_main_job.py::test_the_graph_in_marquez_is_the_reference_graph",
            f"{SERVICE}/test_main_job.py::test_total_price_derives_from_the_postgres_price_column[kafka_supplier_stats]",
        ),
    ),
    Breakage(
        "L3",
        "lineage",
        "lineage_assets/lineage/events.py",
        "terminal events carry no datasets: a run's COMPLETE, ABORT or FAIL names no input or output, which makes "
        "Marquez drop the job's edges",
        "            inputs=self._inputs(job, account, dataset_facets or {}),\n"
        "            outputs=self._outputs(job, account, dataset_facets or {}),\n",
        "            inputs=[] if state in TERMINAL else self._inputs(job, account, dataset_facets or {}),\n"
        "            outputs=[] if state in TERMINAL else self._outputs(job, account, dataset_facets or {}),\n",
        (
            f"{UNIT}/lineage/test_events.py::test_every_event_carries_job_type_and_full_datasets",
            f"{UNIT}/test_flink_runs.py::test_each_way_of_stopping_ends_the_same_run",
            f"{UNIT}/connect/test_connector_lineage.py::test_a_config_changed_under_an_open_run_ends_it_and_a_new_run_carries_the_new_lineage",
            f"{UNIT}/connect/test_connector_lineage.py::test_an_unknown_account_keeps_the_last_one_read_from_the_cursor",
        ),
        (f"{SERVICE}/test_iceberg_ingestion.py::test_sensor_closes_the_run_when_the_job_is_cancelled",),
    ),
)


@dataclass(frozen=True)
class Outcome:
    """What one pytest run of a selection gave: the node ids that failed (or errored), and why the run itself did
    not give a report (``problem``: empty when it did)."""

    failed: tuple[str, ...]
    ran: int
    problem: str = ""


def line_of(text: str, old: str) -> int:
    """The line (from 1) where ``old`` starts in ``text``."""
    return text[: text.index(old)].count("\n") + 1


def problems_with_table(breakages: Iterable[Breakage]) -> list[str]:
    """Why the table cannot be applied as it is: ids not unique, a text not exactly once in its file."""
    found: list[str] = []
    seen: set[str] = set()
    for b in breakages:
        if b.id in seen:
            found.append(f"{b.id}: id used twice")
        seen.add(b.id)
        path = ROOT / b.file
        if not path.is_file():
            found.append(f"{b.id}: {b.file} does not exist")
            continue
        times = path.read_text(encoding="utf-8").count(b.old)
        if times != 1:
            found.append(f"{b.id}: its old text occurs {times} times in {b.file}, not once")
        if b.old == b.new:
            found.append(f"{b.id}: old and new are the same")
    return found


def modified(files: Iterable[str]) -> list[str]:
    """``git status --porcelain`` lines of ``files``: a breakage must start from the committed text."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", *sorted(set(files))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


@contextmanager
def applied(b: Breakage) -> Iterator[int]:
    """The breakage in the working tree for the ``with`` block (yields the line it starts at); the file's bytes and
    modification time are put back on the way out, however it is left (an exception, Ctrl-C, SIGTERM)."""
    path = ROOT / b.file
    original = path.read_bytes()
    stat = path.stat()
    text = original.decode("utf-8")
    line = line_of(text, b.old)
    try:
        path.write_bytes(text.replace(b.old, b.new, 1).encode("utf-8"))
        yield line
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def node_id(case: ET.Element) -> str:
    """A pytest node id from an xunit1 ``testcase`` (its ``file`` attribute, then the class path, then the name)."""
    file = case.get("file") or ""
    classname = case.get("classname") or ""
    module = file.removesuffix(".py").replace("/", ".")
    classes = classname.removeprefix(module).strip(".")
    return "::".join(p for p in (file, *(classes.split(".") if classes else ()), case.get("name") or "") if p)


def run_pytest(selection: Iterable[str]) -> Outcome:
    """Run ``selection`` in a fresh pytest process; the failed node ids from its JUnit XML report. No byte code is
    written (a stale .pyc of a broken file must never outlive the breakage)."""
    with tempfile.TemporaryDirectory(prefix="sanity-") as tmp:
        report = Path(tmp) / "report.xml"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT)}
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--no-header",
            "-rN",
            "-o",
            "junit_family=xunit1",
            f"--junitxml={report}",
            *selection,
        ]
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Outcome((), 0, f"pytest did not end within {RUN_TIMEOUT_S} s")
        if not report.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            return Outcome((), 0, f"pytest exited {done.returncode} without a report: {' | '.join(tail)}")
        cases = ET.parse(report).getroot().iter("testcase")
        failed: list[str] = []
        ran = 0
        for case in cases:
            ran += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(node_id(case))
        if done.returncode not in (0, 1):  # 2: interrupted or a collection error, 3-5: pytest itself
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            return Outcome(tuple(failed), ran, f"pytest exited {done.returncode}: {' | '.join(tail)}")
        return Outcome(tuple(dict.fromkeys(failed)), ran)


def short(node: str) -> str:
    """A node id without the common folder, for the one-line report."""
    return node.removeprefix("tests/unit/lineage_assets/").removeprefix("tests/service/lineage_assets/")


def verdict(outcome: Outcome, expected: Iterable[str]) -> str:
    """The failing tests, and the expected ones that passed (the table needs updating); or SURVIVED."""
    if not outcome.failed:
        return f"SURVIVED ({outcome.problem or f'{outcome.ran} tests passed'})"
    passed = [short(n) for n in expected if n not in outcome.failed]
    return ", ".join(short(n) for n in outcome.failed) + (
        f" (expected, but passed: {', '.join(passed)})" if passed else ""
    )


def raise_on_sigterm() -> None:
    """SIGTERM as an exception, so that a breakage is undone when the script is stopped."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these breakages")
    parser.add_argument("--service", action="store_true", help="also run each breakage's service tests (stack up)")
    args = parser.parse_args(argv)

    chosen = [b for b in BREAKAGES if not args.only or b.id in args.only]
    unknown = sorted(set(args.only or ()) - {b.id for b in BREAKAGES})
    if unknown:
        print(f"unknown breakage id(s) {unknown}; known: {[b.id for b in BREAKAGES]}", file=sys.stderr)
        return 2
    stale = problems_with_table(BREAKAGES)
    if stale:
        print("the table of breakages does not fit the code:\n  " + "\n  ".join(stale), file=sys.stderr)
        return 2
    dirty = modified(b.file for b in chosen)
    if dirty:
        print(
            "target files have uncommitted changes (commit or stash them first):\n  " + "\n  ".join(dirty),
            file=sys.stderr,
        )
        return 2
    raise_on_sigterm()
    started = time.monotonic()

    def selection(b: Breakage) -> tuple[str, ...]:
        return b.unit + (b.service if args.service else ())

    baseline = run_pytest(dict.fromkeys(n for b in chosen for n in selection(b)))
    if baseline.failed or baseline.problem or not baseline.ran:
        print(
            f"the selected tests do not pass on the unbroken product ({baseline.problem or 'failed'}): "
            + ", ".join(baseline.failed),
            file=sys.stderr,
        )
        return 2
    print(f"unbroken: {baseline.ran} selected tests pass")

    survived: list[str] = []
    for b in chosen:
        with applied(b) as line:
            outcome = run_pytest(selection(b))
        if not outcome.failed:
            survived.append(b.id)
        print(f"{b.id:<3} {b.area:<12} {b.file}:{line}  {b.what}\n    -> {verdict(outcome, selection(b))}")
    if not args.service:
        print("service tests not run (needs the stack: --service)")
    if modified(b.file for b in chosen):
        print("a target file is still modified after the run: restore it with git checkout", file=sys.stderr)
        return 2
    print(f"{len(chosen) - len(survived)} of {len(chosen)} breakages caught in {time.monotonic() - started:.0f} s")
    if survived:
        print(f"SURVIVED: {', '.join(survived)}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
