"""A timed step's page-chunk reservations held as a chain (``marconi_vllm_step.HOLDS_ACROSS_STEP``: the evicted
leaf's parent's heap entry held for the next request's reservation, the miss watcher told the step's victims at
once) against each reservation alone (the switch off, the reference).

``test_page_plans_property.py``'s generated bursts (several requests' page chunks in one step, pages 1-64, SWA
and not, tight pools, bounds on and off): after every step the two runs' managers are compared whole (requests,
nodes, locks, pools, stamps, clocks, walk hints, the leaf heap's current entries), and at the end the tables and
summaries (the miss watcher's counts among them). The runs count the held parents taken, so the property is not
met by never taking the path.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from managers_watched import managers_watched
from test_page_plans_property import _state, bursts

from sim.cache.engines import marconi_vllm as vllm_module
from sim.cache.engines import marconi_vllm_step as step_module
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace

_REAL_HAND = step_module.hand_in_step
_TAKEN = {"in_step": 0, "held_taken": 0}

# the runs count through a patch of a name the compiled core binds
pytestmark = pytest.mark.interpreted


def _counting_hand(hold, rules, manager, swa_pages) -> bool:
    held = hold.held[0] if hold.held else None
    handed = _REAL_HAND(hold, rules, manager, swa_pages)
    _TAKEN["in_step"] += handed
    _TAKEN["held_taken"] += handed and held is not None and held[2].alive is False
    return handed


def held_run(trace: Trace, config: SimConfig, holds: bool):
    """The timed run with ``HOLDS_ACROSS_STEP`` as given, and its manager's state after every step."""
    with (
        managers_watched(_state) as (_, states, step),
        mock.patch.object(step_module, "HOLDS_ACROSS_STEP", holds),
        # a steady chunk's reservation too (``reserve_held_page``)
        mock.patch.object(vllm_module, "hand_in_step", _counting_hand),
    ):
        result = simulate(trace, config, on_step=step)
    return result, states


@settings(max_examples=30, deadline=None, derandomize=True)
@given(bursts())
def test_a_step_held_as_a_chain_is_each_reservation_alone(burst):
    trace, config = burst
    ours, our_states = held_run(trace, config, True)
    theirs, their_states = held_run(trace, config, False)
    assert len(our_states) == len(their_states)
    for index, (our_state, their_state) in enumerate(zip(our_states, their_states, strict=True)):
        assert our_state == their_state, f"after step {index}"
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary


# the property runs once, inside test_the_property_holds_parents (which also asserts what its examples reach)
test_a_step_held_as_a_chain_is_each_reservation_alone.__test__ = False


def test_the_property_holds_parents():
    """The runs above take many reservations inside a step, many of them the parent the last one held."""
    _TAKEN.update(in_step=0, held_taken=0)
    test_a_step_held_as_a_chain_is_each_reservation_alone()
    assert _TAKEN["in_step"] > 300 and _TAKEN["held_taken"] > 100, _TAKEN
