"""What a test run ran and skipped, read from its JUnit XML reports. Standard library only: scripts/test.sh calls it
from its exit trap, whatever state the run left the venv in.

    test_reports.py junit REPORTS MODULE...
        For each Maven module, its surefire reports (MODULE/target/surefire-reports/TEST-*.xml) are copied to
        REPORTS/junit/<module name>/ and counted: one line per module. Exit status 1 when a module had a failure or
        an error, or ran no test at all.

    test_reports.py summary REPORTS [--exit-status N] [--ci] [--expected FILE]
        Every skipped test (name and reason) of every report under REPORTS (pytest's --junitxml files REPORTS/*.xml
        and the surefire copies REPORTS/junit/*/*.xml), and every phase of REPORTS/phases.tsv that did not run, with
        why; "skipped: none" when nothing was. With --ci, a skipped test whose "name: reason" no pattern of FILE
        (one regular expression a line, # comments) matches is unexpected, and so is a phase that could not run:
        the exit status is then 1.

REPORTS/phases.tsv is written by scripts/test.sh, a line per state change (phase, state, detail, Unix time;
tab-separated, the last line of a phase wins). States: pending (not started yet), running, passed, skipped (could not
run: detail says why), off (left out on purpose: detail says how). The summary gives each phase's time, from its
"running" line to its last line (issue 38: CI reports each phase's time).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

PHASES = "phases.tsv"
JUNIT = "junit"


@dataclass(frozen=True)
class Skip:
    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


@dataclass
class Report:
    """One JUnit XML file (a pytest run or a surefire test class), counted by its test cases."""

    label: str
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skips: list[Skip] = field(default_factory=list)
    unreadable: str = ""

    def add(self, other: Report) -> None:
        self.tests += other.tests
        self.failures += other.failures
        self.errors += other.errors
        self.skips.extend(other.skips)
        if other.unreadable:
            self.unreadable = "; ".join(filter(None, [self.unreadable, other.unreadable]))


@dataclass(frozen=True)
class Phase:
    name: str
    state: str
    detail: str = ""
    started: float | None = None  # Unix time of its first "running" line
    ended: float | None = None  # Unix time of its last line

    @property
    def seconds(self) -> float | None:
        """How long the phase ran, up to its last state; None when it never ran or a line had no time."""
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started


def read_report(path: Path, label: str | None = None) -> Report:
    """Count a JUnit XML file, pytest's (``<testsuites><testsuite>``) or surefire's (``<testsuite>``) alike."""
    report = Report(label or path.stem)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        report.unreadable = f"{path}: {exc}"
        return report
    for case in root.iter("testcase"):
        report.tests += 1
        if case.find("failure") is not None:
            report.failures += 1
        if case.find("error") is not None:
            report.errors += 1
        skipped = case.find("skipped")
        if skipped is not None:
            name = "::".join(filter(None, [case.get("classname", ""), case.get("name", "")])) or "(unnamed test)"
            reason = (skipped.get("message") or (skipped.text or "").strip() or "no reason given").strip()
            report.skips.append(Skip(name, reason))
    return report


def read_module(module_reports: Path, label: str) -> Report:
    """All surefire reports of one Maven module as one report."""
    total = Report(label)
    for path in sorted(module_reports.glob("TEST-*.xml")):
        total.add(read_report(path, label))
    return total


def read_phases(path: Path) -> list[Phase]:
    """The last state of each phase, in the order the phases first appear, with when it started and last changed."""
    phases: dict[str, Phase] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split("\t", 3)
        if len(parts) < 2 or not parts[0]:
            continue
        name, state = parts[0], parts[1]
        detail = parts[2] if len(parts) > 2 else ""
        try:
            at: float | None = float(parts[3]) if len(parts) > 3 else None
        except ValueError:
            at = None
        started = phases[name].started if name in phases else None
        if state == "running" and started is None:
            started = at
        phases[name] = Phase(name, state, detail, started, at if started is not None else None)
    return list(phases.values())


def phase_times(phases: list[Phase]) -> list[str]:
    """A line per phase that ran: its time in seconds and minutes; then the whole run's, from the first phase's start
    to the last one's end (phases in the background overlap others: their sum would overstate it)."""
    ran = [(p, s) for p in phases if (s := p.seconds) is not None]
    if not ran:
        return []
    lines = [f"  {p.name:<12} {s:7.0f} s  {s / 60:5.1f} min  {p.state}" for p, s in ran]
    whole = max(p.ended for p, _ in ran) - min(p.started for p, _ in ran)
    return ["== phase times", *lines, f"  {'whole run':<12} {whole:7.0f} s  {whole / 60:5.1f} min"]


def read_patterns(path: Path | None) -> list[re.Pattern[str]]:
    if path is None or not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [re.compile(line) for line in lines if line and not line.startswith("#")]


def phase_not_run(phase: Phase, exit_status: int) -> tuple[str, bool] | None:
    """Why a phase did not run to its end, and whether that is on purpose; None when it ran."""
    if phase.state == "passed":
        return None
    if phase.state == "off":
        return f"left out on purpose ({phase.detail or 'no reason given'})", True
    if phase.state == "skipped":
        return f"could not run: {phase.detail or 'no reason given'}", False
    if phase.state == "running":
        return f"did not finish (the run ended with exit status {exit_status} in it)", False
    return f"not reached (the run ended earlier, exit status {exit_status})", False


def junit(reports: Path, modules: list[Path], out=print) -> int:
    """Copy and count each module's surefire reports; 1 when one failed or ran nothing."""
    status = 0
    for module in modules:
        source = module / "target" / "surefire-reports"
        target = reports / JUNIT / module.name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for path in sorted(source.glob("TEST-*.xml")):
            shutil.copy2(path, target / path.name)
        r = read_module(target, module.name)
        line = f"  {module}: {r.tests} tests run, {r.failures} failures, {r.errors} errors, {len(r.skips)} skipped"
        problems = []
        if r.failures or r.errors:
            problems.append("FAILED")
        if r.tests == 0:
            problems.append(f"NO TESTS RAN (no TEST-*.xml with a test case in {source})")
        if r.unreadable:
            problems.append(f"unreadable report: {r.unreadable}")
        out(line + (f"  <- {'; '.join(problems)}" if problems else ""))
        if problems:
            status = 1
    return status


def collect(reports: Path) -> list[Report]:
    """pytest's reports (REPORTS/*.xml, one per phase), then each Maven module's (REPORTS/junit/<module>/)."""
    found = [read_report(path) for path in sorted(reports.glob("*.xml"))]
    for module in sorted(p for p in (reports / JUNIT).glob("*") if p.is_dir()):
        found.append(read_module(module, f"{JUNIT}/{module.name}"))
    return found


def summary(reports: Path, exit_status: int = 0, ci: bool = False, expected: Path | None = None, out=print) -> int:
    """Print what the run skipped; with ``ci``, 1 when something skipped that was not expected."""
    found = collect(reports)
    patterns = read_patterns(expected)
    skips = [(r.label, s) for r in found for s in r.skips]
    unexpected = [(label, s) for label, s in skips if not any(p.search(str(s)) for p in patterns)]
    phases = read_phases(reports / PHASES)
    not_run = [(p, why) for p in phases if (why := phase_not_run(p, exit_status))]

    for line in phase_times(phases):
        out(line)
    out(f"== test reports ({reports})")
    if not found:
        out("  none written")
    for r in found:
        extra = f", {r.failures} failures, {r.errors} errors" if r.failures or r.errors else ""
        out(f"  {r.label}: {r.tests} tests{extra}, {len(r.skips)} skipped")
        if r.unreadable:
            out(f"    unreadable: {r.unreadable}")
    if not skips and not not_run:
        out("skipped: none")
        return 0
    out(f"skipped: {len(skips)} test(s); phases not run: {len(not_run)}")
    for label, s in skips:
        mark = "  <- unexpected" if ci and (label, s) in unexpected else ""
        out(f"  [{label}] {s}{mark}")
    for phase, (why, _) in not_run:
        out(f"  phase {phase.name}: {why}")
    if not ci:
        return 0
    # a phase that failed or was not reached already failed the run; one that could not run is a skip CI must see
    bad_phases = [p for p, (_, on_purpose) in not_run if p.state == "skipped" and not on_purpose]
    if unexpected or bad_phases:
        parts = []
        if unexpected:
            where = f" (no pattern of {expected} matches)" if expected else ""
            parts.append(f"{len(unexpected)} unexpected skipped test(s){where}")
        if bad_phases:
            parts.append(f"{len(bad_phases)} phase(s) that could not run")
        out(
            f"CI: {' and '.join(parts)}: failing the run. Fix the cause, or list an expected skip in the patterns file."
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    j = sub.add_parser("junit", help="copy and count Maven modules' surefire reports")
    j.add_argument("reports", type=Path)
    j.add_argument("modules", type=Path, nargs="+")
    s = sub.add_parser("summary", help="list what the run skipped")
    s.add_argument("reports", type=Path)
    s.add_argument("--exit-status", type=int, default=0)
    s.add_argument("--ci", action="store_true", help="fail on a skipped test no --expected pattern matches")
    s.add_argument("--expected", type=Path, help="regular expressions of expected skips, one a line")
    args = parser.parse_args(argv)
    if args.command == "junit":
        return junit(args.reports, args.modules)
    return summary(args.reports, args.exit_status, args.ci, args.expected)


if __name__ == "__main__":
    sys.exit(main())
