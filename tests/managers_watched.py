"""A run's cache managers watched from outside: the properties that compare two paths whole read the manager's
state after every step, which ``simulate`` keeps to itself."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from sim.run import simulate as simulate_module


@contextmanager
def managers_watched(state_of: Callable[[Any], Any]) -> Iterator[tuple[list, list, Callable[..., None]]]:
    """``simulate``'s ``make_manager`` patched to keep each manager it makes; yields ``(managers, states, step)``,
    ``step`` the ``on_step`` that appends ``state_of`` the first manager to ``states``."""
    managers: list = []
    states: list = []
    make = simulate_module.make_manager

    def made(*args, **kwargs):
        managers.append(make(*args, **kwargs))
        return managers[-1]

    def step(*args) -> None:
        states.append(state_of(managers[0]))

    with mock.patch.object(simulate_module, "make_manager", side_effect=made):
        yield managers, states, step


def assert_watched_equal(ours, our_states: list, theirs, their_states: list) -> None:
    """Two watched runs the same: the manager's state after every step, the request and step tables, the summary."""
    assert len(our_states) == len(their_states)
    for index, (our_state, their_state) in enumerate(zip(our_states, their_states, strict=True)):
        assert our_state == their_state, f"after step {index}"
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary
