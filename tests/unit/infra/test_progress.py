"""The step printer of `lineage-lab pipeline run`: a line per step with duration and result, bars bounded off a
terminal and redrawn in place on one, warnings and failures in full."""

from __future__ import annotations

import io

import pytest

from infra.progress import Steps


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def printer(tty: bool) -> tuple[Steps, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    return Steps(out, tty=tty, clock=clock, width=20), out, clock


def test_a_step_is_one_line_with_its_duration_and_result():
    steps, out, clock = printer(tty=False)
    with steps.step("deploy") as step:
        clock.now += 12.34
        step.ok("run http://ui/runs/1")
    with steps.step("sensors on"):
        clock.now += 0.5
    assert out.getvalue().splitlines() == [
        "  deploy                 12.3 s  ok  run http://ui/runs/1",
        "  sensors on              0.5 s  ok",
    ]
    assert steps.problems == 0 and steps.failed is None


def test_off_a_terminal_a_bar_prints_a_line_per_quarter_passed_at_most():
    steps, out, clock = printer(tty=False)
    with steps.step("orders") as step:
        for done in range(0, 201):  # a poll per order: still three lines
            clock.now += 1
            step.progress(done, 200, "orders")
        step.ok("200 orders")
    lines = out.getvalue().splitlines()
    assert [line.split()[3] for line in lines[:-1]] == ["25%", "50%", "75%"]
    assert "(50/200) orders" in lines[0]
    assert lines[-1].endswith("ok  200 orders") and "\r" not in out.getvalue()


def test_off_a_terminal_a_jump_past_several_quarters_is_one_line():
    steps, out, _ = printer(tty=False)
    with steps.step("spark") as step:
        step.progress(0, 3)
        step.progress(2, 3, "2024-01-01 started")
        step.progress(2, 3, "2024-01-01 started")
        step.progress(3, 3, "2024-01-01 done")  # the step's line says it
    first, last = out.getvalue().splitlines()
    assert "50% (2/3) 2024-01-01 started" in first and last.endswith("ok")


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_cleared_by_the_step_line():
    steps, out, clock = printer(tty=True)
    with steps.step("orders") as step:
        for done in (0, 100, 200):
            clock.now += 1
            step.progress(done, 200)
    text = out.getvalue()
    assert text.count("\n") == 1, "the bar never adds a line"
    assert "[##########..........] 100/200" in text and "\r\033[K" in text
    assert text.rsplit("\r\033[K", 1)[1] == "  orders                  3.0 s  ok\n"


def test_warnings_print_in_full_below_the_step():
    steps, out, _ = printer(tty=False)
    with steps.step("asset checks") as step:
        step.warn("3 checks: 2 passed, 1 warned", "WARNING a dead_letter_share: 12 %\nof 100 orders")
    assert out.getvalue().splitlines() == [
        "  asset checks            0.0 s  WARN  3 checks: 2 passed, 1 warned",
        "    WARNING a dead_letter_share: 12 %",
        "    of 100 orders",
    ]
    assert steps.problems == 1


def test_a_failing_step_prints_failed_and_the_whole_error_then_raises():
    steps, out, clock = printer(tty=True)
    error = "deploy failed: run http://ui/runs/9\nstep x: Traceback (most recent call last):\n  boom"
    with pytest.raises(RuntimeError, match="deploy failed"), steps.step("deploy"):
        clock.now += 2
        raise RuntimeError(error)
    lines = out.getvalue().split("\r\033[K")[-1].splitlines()
    assert lines == [
        "  deploy                  2.0 s  FAILED",
        "    deploy failed: run http://ui/runs/9",
        "    step x: Traceback (most recent call last):",
        "      boom",
    ]
    assert steps.failed == "deploy" and steps.problems == 1


def test_a_failure_found_without_stopping_is_a_failed_line_and_counted():
    steps, out, _ = printer(tty=False)
    with steps.step("drift report") as step:
        step.fail("2 difference(s)", "missing job a", "extra edge b")
    assert out.getvalue().splitlines()[0].endswith("FAILED  2 difference(s)")
    assert steps.problems == 1 and steps.failed is None
