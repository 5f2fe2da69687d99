"""benchmarks/mutant_reach.py: a mutant's changed line is found where it is now, and the line watch sees the
watched lines a call runs and not the ones it does not (the live search against its reference)."""

from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace

from benchmarks.mutant_catalogue import load
from benchmarks.mutant_reach import LineWatch, changed_line
from sim.cache import matching


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_the_changed_line_is_the_one_line_the_mutant_changes():
    mutants = {m.name: m for m in load()}
    assert changed_line(mutants["match-window"]) == _line_of(
        matching.live_window_breaks_at, "live_run >= window"
    )
    # a snippet that carries context: the changed line is below its first line
    context = mutants["match-window"]._replace(
        original="        live_run += node.end - node.start\n        if live_run >= window:\n",
        replacement="        live_run += node.end - node.start\n        if live_run > window:\n",
    )
    assert changed_line(context) == changed_line(mutants["match-window"])


def test_the_watch_sees_the_lines_a_call_runs_and_only_those():
    live = _line_of(matching.live_window_breaks_at, "live_run >= window")
    reference = _line_of(matching.deepest_acceptable_scan, "ok = live_run >= window")
    watch = LineWatch({inspect.getsourcefile(matching): {live, reference}})
    path = [SimpleNamespace(swa_pages=[0], start=i * 4, end=i * 4 + 4) for i in range(3)]
    sys.settrace(watch)
    try:
        assert matching.live_window_breaks_at(path, 2, 8) is None
    finally:
        sys.settrace(None)
    ran = watch.take()
    assert ran == {(inspect.getsourcefile(matching), live)}
    assert watch.take() == set()
    sys.settrace(watch)
    try:
        assert matching.deepest_acceptable_scan(path, 8, True, False) is path[-1]
    finally:
        sys.settrace(None)
    assert watch.take() == {(inspect.getsourcefile(matching), reference)}
