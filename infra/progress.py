"""A command's output as a progress report: one line per step with its duration and result, a progress bar for
the long waits, warnings and failures in full.

On a terminal a running step and its bar are one line redrawn in place (``\\r``); elsewhere (CI, a pipe, a file)
nothing is redrawn and a bar prints at most three lines (when it passes 25, 50 and 75 %), so the output stays short
and its length bounded whatever the wait."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

#: the quarters a bar reports off a terminal (100 % is the step's own line)
MARKS = (25, 50, 75)
BAR = 20


def _seconds(s: float) -> str:
    return f"{s:6.1f} s"


class Step:
    """One step; the ``with`` block of :meth:`Steps.step` ends it with its duration and result."""

    def __init__(self, steps: Steps, name: str) -> None:
        self.steps = steps
        self.name = name
        self.started = steps.clock()
        self.result = "ok"
        self.notes: list[str] = []
        self._marks_passed = 0

    @property
    def elapsed(self) -> float:
        return self.steps.clock() - self.started

    def ok(self, detail: str) -> None:
        """The step succeeded; ``detail`` follows "ok" on its line."""
        self.result = f"ok  {detail}" if detail else "ok"

    def warn(self, summary: str, *details: str) -> None:
        """The step did its work with a warning: ``WARN summary`` on its line, each detail in full below it."""
        self.result = f"WARN  {summary}"
        self.notes.extend(details)

    def fail(self, summary: str, *details: str) -> None:
        """The step found a failure but the command goes on: ``FAILED summary``, each detail in full below it."""
        self.result = f"FAILED  {summary}"
        self.notes.extend(details)

    def note(self, text: str) -> None:
        """A line printed in full below the step's line (a warning's text, what to look at)."""
        self.notes.append(text)

    def progress(self, done: float, total: float, note: str = "") -> None:
        """Where a long wait is: a bar redrawn in place on a terminal; elsewhere a line at each quarter passed."""
        fraction = min(max(done / total, 0.0), 1.0) if total else 0.0
        count = f"{done:g}/{total:g}"
        if self.steps.tty:
            bar = "#" * round(fraction * BAR) + "." * (BAR - round(fraction * BAR))
            self.steps.redraw(f"{self.steps.head(self.name, self.elapsed)}  [{bar}] {count} {note}".rstrip())
            return
        passed = sum(1 for m in MARKS if fraction * 100 >= m)
        if passed > self._marks_passed and fraction < 1:  # done: the step's own line follows
            self._marks_passed = passed
            pct = MARKS[passed - 1]
            self.steps.write(f"{self.steps.head(self.name, self.elapsed)}  {pct}% ({count}) {note}".rstrip())


class Steps:
    """Prints steps to ``out`` (stdout by default, as it is when the printer is made: output redirected later,
    e.g. a Dagster run's console into its log file, does not take the report with it)."""

    def __init__(
        self,
        out: TextIO | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        width: int = 34,
    ) -> None:
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.clock = clock
        self.width = width
        self._drawn = False
        #: the step that failed (its error printed in full), if one did
        self.failed: str | None = None
        #: how many steps ended not ok (warned or failed)
        self.problems = 0

    def head(self, name: str, seconds: float) -> str:
        return f"  {name:<{self.width}} {_seconds(seconds)}"

    def write(self, line: str) -> None:
        """A whole line (after clearing a line being redrawn)."""
        if self._drawn:
            self.out.write("\r\033[K")
            self._drawn = False
        self.out.write(line + "\n")
        self.out.flush()

    def redraw(self, line: str) -> None:
        self.out.write("\r\033[K" + line)
        self.out.flush()
        self._drawn = True

    @contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """Run a step: its line is printed when the block ends (``FAILED`` and the error in full if it raises)."""
        step = Step(self, name)
        if self.tty:
            self.redraw(f"  {name:<{self.width}}    ...")
        try:
            yield step
        except Exception as exc:
            self.write(f"{self.head(name, step.elapsed)}  FAILED")
            for line in [*step.notes, *str(exc).splitlines()]:
                self.write(f"    {line}")
            self.failed = name
            self.problems += 1
            raise
        self.problems += not step.result.startswith("ok")
        self.write(f"{self.head(name, step.elapsed)}  {step.result}")
        for note in step.notes:
            for line in note.splitlines():
                self.write(f"    {line}")
