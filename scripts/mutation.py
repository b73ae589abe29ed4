"""Mutation testing of the core logic (issue 28): every listed mutant must be killed, and the table says by which test.

Python: mutmut 3 (configured in pyproject.toml, ``[tool.mutmut]``) mutates the files of the core logic and runs the
fast unit tests against the mutants of the functions listed in ``[tool.lineage-lab.mutation] functions``. mutmut
runs a mutant's covering tests with ``pytest -x`` but does not record which test failed, so a plugin added to each of
its pytest sessions (``FirstFailure``) records the test that stopped the run: the mutant's killer. (Before, a second
pass ran each killed mutant's tests again one by one: 648 of the full table's 2,900 in 51 CPU-minutes.)

Java: a hand-listed set of mutations of the valid-order rule (``OrderRule.java``), each applied to a temporary copy
of the Maven module (the tracked file is never edited), whose tests must then fail; the failing JUnit test is read
from the surefire reports.

    .venv/bin/python scripts/mutation.py          # everything; the table also goes to docs/mutation.md
    .venv/bin/python scripts/mutation.py --fast   # the `fast` subset (scripts/test.sh); exits 1 if one survives

Exit status: 0 when every listed mutant is killed (or times out, which is a detection too), 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
JAVA_MODULE = ROOT / "flink_jobs" / "order-functions"
JAVA_RULE = Path("src/main/java/lab/lineage/orders/OrderRule.java")
DOC = ROOT / "docs" / "mutation.md"
#: the environment variable naming the file FirstFailure appends each mutant's killer to
KILLERS_ENV = "LINEAGE_LAB_MUTATION_KILLERS"


@dataclass(frozen=True)
class JavaMutant:
    id: str
    where: str  # method of OrderRule
    old: str  # exact text in OrderRule.java (must occur once)
    new: str


#: the scripted mutations of the valid-order rule: its bounds, each off by one or flipped
JAVA_MUTANTS = (
    JavaMutant("J1", "clockFreeReason", "price.signum() < 0", "price.signum() <= 0"),
    JavaMutant("J2", "clockFreeReason", "if (price.signum() < 0) {", "if (false) {"),
    JavaMutant("J3", "clockFreeReason", "price.compareTo(MAX_PRICE) > 0", "price.compareTo(MAX_PRICE) >= 0"),
    JavaMutant("J4", "MAX_PRICE", 'new BigDecimal("99999999.99")', 'new BigDecimal("999999999.99")'),
    JavaMutant("J5", "PRICE_SCALE", "PRICE_SCALE = 2;", "PRICE_SCALE = 3;"),
    JavaMutant("J6", "reason", "bidTimeMs > nowMs + maxFutureS * 1000", "bidTimeMs >= nowMs + maxFutureS * 1000"),
    JavaMutant("J7", "reason", "bidTimeMs < nowMs - maxPastS * 1000", "bidTimeMs <= nowMs - maxPastS * 1000"),
    JavaMutant("J8", "reason", "bidTimeMs > nowMs + maxFutureS * 1000", "bidTimeMs > nowMs + maxFutureS * 1000 + 1"),
    JavaMutant("J9", "reason", "bidTimeMs < nowMs - maxPastS * 1000", "bidTimeMs < nowMs - maxPastS * 1000 - 1"),
    JavaMutant(
        "J10", "clockFreeReason", "orderId == null || orderId.isBlank()", "orderId == null || orderId.isEmpty()"
    ),
    JavaMutant("J11", "clockFreeReason", "supplier == null || supplier.isBlank()", "supplier == null"),
    JavaMutant("J12", "OrderRule(long, long)", "maxFutureS < 0 || maxPastS < 0", "maxFutureS < 0"),
)
#: the Java mutants --fast runs (each compiles and runs OrderRuleTest once, ~8 s)
JAVA_FAST = ("J3", "J6", "J7", "J8", "J9")


@dataclass
class Row:
    id: str
    where: str
    change: str
    status: str
    killer: str


def settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]


# --- Python (mutmut) ------------------------------------------------------------------------------------------
def run_mutmut(functions: list[str]) -> dict[str, str]:
    """``mutmut run`` of the functions' mutants, in a child process that narrows ``only_mutate`` to their files
    (mutmut generates every mutant of a file it mutates: fewer files, less time); mutant name -> the test that
    killed it (``FirstFailure``)."""
    shutil.rmtree(MUTANTS, ignore_errors=True)  # a fresh copy: no verdict cached from another tree
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_mutmut", *functions]
    with tempfile.TemporaryDirectory() as tmp:
        killers = Path(tmp) / "killers.jsonl"
        killers.touch()
        out = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, KILLERS_ENV: str(killers)}
        )
        if out.returncode != 0:
            sys.stdout.write(out.stdout[-4000:] + out.stderr[-4000:])
            raise SystemExit(f"mutmut run failed (exit {out.returncode})")
        found: dict[str, str] = {}
        for line in killers.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            found.setdefault(record["mutant"], record["killer"])
        return found


class FirstFailure:
    """A pytest plugin in each of mutmut's runs of a mutant's tests: mutmut runs them with ``-x``, so the first test
    that fails (in its setup, call or teardown) is the one that stopped the run, the mutant's killer; it is appended
    to ``path`` as a JSON line. Runs that are not of a mutant (mutmut's stats and clean runs) record nothing."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.recorded = False

    def record(self, what: str) -> None:
        from mutmut.mutation.trampoline import get_mutant_under_test

        mutant = get_mutant_under_test()
        if self.recorded or "__mutmut_" not in mutant:
            return
        self.recorded = True
        with open(self.path, "a", encoding="utf-8") as out:  # one short line: an atomic append
            out.write(json.dumps({"mutant": mutant, "killer": what}) + "\n")

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed:
            self.record(report.nodeid)

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.record(f"(collecting {report.nodeid or 'the tests'} failed)")


def _mutmut_run(functions: list[str]) -> int:
    from mutmut.__main__ import _run
    from mutmut.configuration import config
    from mutmut.runners.harness import PytestRunner

    files = {f.partition(".x")[0].replace(".", "/") + ".py" for f in functions}
    config().only_mutate = [p for p in config().only_mutate if p in files]
    # every pytest session mutmut starts (in this process or in the workers it forks) gets the plugin
    killers = os.environ[KILLERS_ENV]
    execute_pytest = PytestRunner.execute_pytest

    def with_first_failure(runner, params, **kwargs):
        return execute_pytest(
            runner, params, **{**kwargs, "plugins": [*kwargs.get("plugins", []), FirstFailure(killers)]}
        )

    PytestRunner.execute_pytest = with_first_failure
    try:
        _run([f"{f}__mutmut_*" for f in functions], None)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def mutmut_results(functions: list[str]) -> dict[str, tuple[str, str, int | None]]:
    """mutant name -> (source path, mangled function name, exit code)"""
    found = {}
    for meta in MUTANTS.rglob("*.py.meta"):
        path = str(meta.relative_to(MUTANTS))[: -len(".meta")]
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            mangled = name.partition("__mutmut_")[0]
            if mangled in functions:
                found[name] = (path, mangled, code)
    return found


def status_of(code: int | None) -> str:
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[code]


def change_of(name: str, path: str) -> str:
    """The mutated part of the line(s): `old` → `new`, with a few characters of context."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        diff = get_diff_for_mutant(name, path=path)
    finally:
        os.chdir(cwd)
    old = " ".join(line[1:].strip() for line in diff.splitlines() if line.startswith("-") and line[:3] != "---")
    new = " ".join(line[1:].strip() for line in diff.splitlines() if line.startswith("+") and line[:3] != "+++")
    return condense(old, new)


def condense(old: str, new: str, context: int = 12) -> str:
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    blocks = [b for b in matcher.get_opcodes() if b[0] != "equal"]
    if not blocks:
        return "(no textual change)"
    a0, a1, b0, b1 = blocks[0][1], blocks[-1][2], blocks[0][3], blocks[-1][4]
    lo_a, lo_b = max(0, a0 - context), max(0, b0 - context)
    pre = "…" if lo_a > 0 else ""
    post_a = "…" if a1 + context < len(old) else ""
    post_b = "…" if b1 + context < len(new) else ""
    return f"`{pre}{old[lo_a : a1 + context]}{post_a}` → `{pre}{new[lo_b : b1 + context]}{post_b}`"


def python_rows(functions: list[str]) -> list[Row]:
    killers = run_mutmut(functions)
    results = mutmut_results(functions)
    missing = sorted(set(functions) - {mangled for _, mangled, _ in results.values()})
    if missing:
        raise SystemExit(f"no mutants for {missing}: renamed, or excluded with a pragma? fix pyproject.toml")
    rows = []
    for name, (path, mangled, code) in sorted(results.items(), key=lambda kv: _natural(kv[0])):
        status = status_of(code)
        module, _, function = mangled.rpartition(".")
        function = function.removeprefix("x_").removeprefix("xǁ").replace("ǁ", ".")
        killer = killers.get(name, "")
        if status == "killed" and not killer:
            killer = "(mutmut's run failed outside any test)"
        elif status == "timeout":
            killer = "(the tests never finish)"
        rows.append(
            Row(
                name.rpartition(".")[2].replace("ǁ", "."),
                f"{module}:{function}",
                change_of(name, path),
                status,
                killer.removeprefix("tests/unit/"),
            )
        )
    return rows


def _natural(name: str) -> tuple:
    head, _, number = name.rpartition("__mutmut_")
    return head, int(number)


# --- Java (scripted) ------------------------------------------------------------------------------------------
def java_rows(mutants: tuple[JavaMutant, ...], only_rule_test: bool) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="order-functions-mutants-") as tmp:
        module = Path(tmp) / "order-functions"
        module.mkdir()
        shutil.copy2(JAVA_MODULE / "pom.xml", module / "pom.xml")
        shutil.copytree(JAVA_MODULE / "src", module / "src")
        original = (module / JAVA_RULE).read_text()
        cmd = ["mvn", "-q", "-o", "test"] + (["-Dtest=OrderRuleTest"] if only_rule_test else [])
        for m in mutants:
            if original.count(m.old) != 1:
                raise SystemExit(f"{m.id}: {m.old!r} does not occur exactly once in {JAVA_RULE}: update JAVA_MUTANTS")
            (module / JAVA_RULE).write_text(original.replace(m.old, m.new))
            shutil.rmtree(module / "target" / "surefire-reports", ignore_errors=True)
            proc = subprocess.run(cmd, cwd=module, capture_output=True, text=True)
            failed = _surefire_failures(module / "target" / "surefire-reports")
            if proc.returncode == 0:
                status, killer = "survived", ""
            elif failed:
                status, killer = "killed", failed[0]
            else:
                status, killer = (
                    "killed",
                    "(compilation failed)" if "COMPILATION ERROR" in proc.stdout else "(mvn failed)",
                )
            rows.append(Row(m.id, f"OrderRule.java:{m.where}", condense(m.old, m.new), status, killer))
        (module / JAVA_RULE).write_text(original)
    return rows


def _surefire_failures(reports: Path) -> list[str]:
    failed = []
    for xml in sorted(reports.glob("TEST-*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(f"{case.get('classname', '').rpartition('.')[2]}.{case.get('name')}")
    return failed


# --- the table ------------------------------------------------------------------------------------------------
def table(rows: list[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| mutant | where | change | status | killed by |", "|---|---|---|---|---|"]
    lines += [f"| {r.id} | {cell(r.where)} | {cell(r.change)} | {r.status} | {cell(r.killer)} |" for r in rows]
    return "\n".join(lines)


def per_module(rows: list[Row]) -> str:
    """Mutants per module (a J-row's module is the Java file) and what became of them."""
    statuses = ("killed", "timeout", "survived")
    counts: dict[str, dict[str, int]] = {}
    for r in rows:
        module = r.where.partition(":")[0]
        by_status = counts.setdefault(module, dict.fromkeys(statuses, 0))
        by_status[r.status] = by_status.get(r.status, 0) + 1
    lines = ["| module | mutants | killed | timeout | not killed |", "|---|---|---|---|---|"]
    for module, c in counts.items():
        other = sum(n for s, n in c.items() if s not in ("killed", "timeout"))
        lines.append(f"| `{module}` | {sum(c.values())} | {c['killed']} | {c['timeout']} | {other} |")
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def write_doc(rows: list[Row], seconds: float) -> None:
    tool = settings()
    DOC.write_text(
        "# Mutation testing of the core logic\n\n"
        "Generated by `.venv/bin/python scripts/mutation.py` (issue 28); do not edit by hand. mutmut "
        f"{_mutmut_version()} mutates the functions listed in `pyproject.toml` (`[tool.lineage-lab.mutation]`) and "
        "runs their fast unit tests against each mutant; J-rows are the scripted mutations of the valid-order rule "
        "(`OrderRule.java`, in a temporary copy of the Maven module, its JUnit tests run by `mvn -o test`). "
        "*killed by* is the test that failed first in mutmut's run of the mutant (its covering tests, in the files' "
        "order, with `pytest -x`; a JUnit test for a J-row). `scripts/test.sh` runs the `fast` subset "
        f"(`{len(tool['lineage-lab']['mutation']['fast'])}` functions + {len(JAVA_FAST)} Java mutants) and fails on a "
        "survivor.\n\n"
        "Equivalent mutants (no test can tell them apart) are excluded in the source with "
        "`# pragma: no mutate` and the reason, on the line.\n\n"
        f"{len(rows)} mutants: {summary(rows)} (in {seconds:.0f} s).\n\n{per_module(rows)}\n\n{table(rows)}\n"
    )


def _mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--_mutmut":
        return _mutmut_run(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="only the `fast` subset (CI); the doc is not written")
    parser.add_argument("--no-java", action="store_true", help="leave the Java mutants out")
    args = parser.parse_args()
    tool = settings()
    listed = tool["lineage-lab"]["mutation"]
    functions = listed["fast"] if args.fast else listed["functions"]
    unknown = sorted(set(functions) - set(listed["functions"]))
    if unknown:
        raise SystemExit(f"fast lists functions that `functions` does not: {unknown}")
    start = time.monotonic()
    # the Java mutants (a Maven build each, one JVM at a time) beside mutmut's run: mutmut's time limit is in CPU
    # seconds, so sharing the cores does not time a mutant out; the rows keep their order (Python, then Java)
    with ThreadPoolExecutor(max_workers=1) as java_side:
        java = tuple(m for m in JAVA_MUTANTS if m.id in JAVA_FAST) if args.fast else JAVA_MUTANTS
        java_done = None if args.no_java else java_side.submit(java_rows, java, only_rule_test=args.fast)
        rows = python_rows(functions)
        if java_done is not None:
            rows += java_done.result()
    seconds = time.monotonic() - start
    print(table(rows))
    print(f"\n{len(rows)} mutants: {summary(rows)} in {seconds:.0f} s")
    if not args.fast and not args.no_java:
        write_doc(rows, seconds)
        print(f"written to {DOC.relative_to(ROOT)}")
    survivors = [r for r in rows if r.status not in ("killed", "timeout")]
    for r in survivors:
        print(f"NOT KILLED: {r.id} {r.where} {r.change} ({r.status})", file=sys.stderr)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
