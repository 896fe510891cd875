"""Progress without a terminal: plain lines on stderr for a long run (a CI log is never silent), none for a short
one."""

from __future__ import annotations

import pytest

from runners.commands._common import LineProgress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_short_run_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    clock = _Clock()
    with LineProgress(clock=clock) as progress:
        task = progress.add_task("cases", total=10, passed="")
        for done in range(1, 11):
            clock.now = done * 0.5
            progress.update(task, completed=done, total=10, passed=f"{done} passed")
    assert capsys.readouterr().err == ""


def test_a_long_run_prints_a_line_per_tenth_at_most_every_few_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    clock = _Clock()
    with LineProgress(clock=clock) as progress:
        task = progress.add_task("sweep", total=None, passed="")
        for done in range(1, 101):
            clock.now = done * 1.0
            progress.update(task, completed=done, total=100)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("sweep: 10/100 (10%) case runs")
    assert lines[-1].startswith("sweep: 100/100 (100%) case runs") and lines[-1].endswith("1m40s")
    assert 9 <= len(lines) <= 12, lines


def test_a_stalled_run_still_says_where_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    clock = _Clock()
    with LineProgress(clock=clock) as progress:
        task = progress.add_task("cases", total=1000, passed="")
        for minute in range(1, 6):
            clock.now = minute * 61.0
            progress.update(task, completed=minute, total=1000, passed=f"{minute} passed")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 6 and "5/1000 (0%) case runs, 5 passed" in lines[-1]
