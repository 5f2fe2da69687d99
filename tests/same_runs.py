"""Two runs of the same trace and config told apart by a switch decide alike: their request and step tables and
their summary are equal (the properties that hold a fast path to its reference). ``same_both_ways`` is the
property's whole shell: the run with the switch on and off, a configuration the engine refuses rejected, the logs
and tables held equal; ``same_run_counting`` runs both and counts the switch-on run's calls of the fast path."""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

from hypothesis import reject

from sim.run.simulate import simulate


def assert_same_run(result, reference) -> None:
    assert result.requests.equals(reference.requests)
    assert result.steps.equals(reference.steps)
    assert result.summary == reference.summary


def same_both_ways(run: Callable[[bool], tuple]) -> tuple[tuple, tuple]:
    """``run(True)``, the switch on (the fast path), and ``run(False)``, off (the reference): each returns
    ``(log, result, *more)`` and sets its switch itself (through the test's ``monkeypatch``, undone as the test
    ends). Asserts the two logs equal and the two the same run; returns both tuples for the test's own checks
    (the fast path taken, floors). A configuration the engine refuses is not an example: the switch-on run
    raises ``ValueError`` (both runs check the config alike), and a property ``reject()``s it."""
    try:
        on = run(True)
    except ValueError:  # a configuration the engine refuses (e.g. FreeToken's scan chunk and the page)
        reject()
    off = run(False)
    assert on[0] == off[0]
    assert_same_run(on[1], off[1])
    return on, off


def same_run_counting(trace, config, owner, method: str, counted, switch_module, switch: str) -> int:
    """``simulate`` with ``owner.method`` watched, asserted the same run as with ``switch_module.switch`` off (the
    reference); returns how many of the watched calls ``counted(args, result)`` said yes to (args with self)."""
    original = getattr(owner, method)
    counts = {"yes": 0}

    def watched(*args):
        result = original(*args)
        counts["yes"] += bool(counted(args, result))
        return result

    with mock.patch.object(owner, method, autospec=True, side_effect=watched):
        fast = simulate(trace, config)
    with mock.patch.object(switch_module, switch, False):
        reference = simulate(trace, config)
    assert_same_run(fast, reference)
    return counts["yes"]
