"""Two runs of the same trace and config told apart by a switch decide alike: their request and step tables and
their summary are equal (the properties that hold a fast path to its reference); ``same_run_counting`` runs both
and counts the switch-on run's calls of the fast path."""

from __future__ import annotations

from unittest import mock

from sim.run.simulate import simulate


def assert_same_run(result, reference) -> None:
    assert result.requests.equals(reference.requests)
    assert result.steps.equals(reference.steps)
    assert result.summary == reference.summary


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
