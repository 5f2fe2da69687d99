"""Progress in a log: a line every few seconds with the total and an ETA; nothing for a short run."""
from __future__ import annotations

import io

import pytest

from sim.progress import LogProgress, progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_one_line_per_interval_with_total_and_eta():
    stream, clock = io.StringIO(), Clock()
    log = LogProgress(1000, "simulating sglang", "requests", stream, interval_s=5.0, clock=clock)
    for done in range(0, 1001, 10):
        clock.now = done / 50  # 50 requests a second: 20 s in all
        log.update(done)
    log.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 + 1  # at 5, 10, 15, 20 s, then the closing line
    assert lines[0] == "simulating sglang: 250 / 1,000 requests (25%), 5 s elapsed, ETA 15 s"
    assert lines[-1] == "simulating sglang: 1,000 / 1,000 requests (100%), 20 s elapsed, finished"


def test_a_resumed_sweep_estimates_from_the_points_it_runs():
    stream, clock = io.StringIO(), Clock()
    log = LogProgress(100, "grid", "points", stream, interval_s=5.0, clock=clock)
    log.update(60, "0 running, 0 failed")  # 60 were already done when the sweep started
    clock.now = 10.0
    log.update(70, "2 running, 0 failed")  # 10 points in 10 s: 30 left take 30 s
    assert stream.getvalue() == "grid: 70 / 100 points (70%), 10 s elapsed, ETA 30 s; 2 running, 0 failed\n"


def test_a_short_run_prints_nothing_and_a_disabled_one_never_does():
    stream = io.StringIO()
    with progress(10, "simulating", "requests", stream=stream) as update:
        for done in range(11):
            update(done)
    assert stream.getvalue() == ""
    with progress(10, "simulating", "requests", stream=stream, enabled=False) as update:
        update(5)
    assert stream.getvalue() == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("total", [0, 3])
def test_a_terminal_gets_a_live_bar(total):
    stream = Terminal()
    with progress(total, "grid", "points", stream=stream) as update:
        for done in range(total + 1):
            update(done, "0 failed")
    assert isinstance(stream.getvalue(), str)  # rich drew (and cleared) its bar without failing
