"""vLLM+'s timed page chunk in one function a side (``marconi_vllm_lean.py``, switch ``LEAN_STEPS``): the
reservation's and the commit's statements in line are ``hand_top_leaf`` and ``commit_page`` (the switch off, the
reference).

The timed runs of ``test_page_plans_property.py``'s generated bursts (several requests' chunks beside decodes in
one step, pages 1 to 64, SWA and not, tight pools, bounds on and off), the switch on and off: after every step
the two managers are compared whole (requests, nodes, locks, pools and free ids, stamps, clocks, walk hints, the
leaf heap's current entries), at the end the tables and summaries. The lean functions' answers are counted, so
the property is not met by never taking them.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from test_page_plans_property import bursts, watched_run

from sim.cache.engines import marconi_vllm_lean as lean

_REAL_HAND, _REAL_COMMIT = lean.lean_hand_top_leaf, lean.lean_commit_page
_TAKEN = {"handed": 0, "committed": 0}

# the runs count through patches of names the compiled core binds
pytestmark = pytest.mark.interpreted


def _counting_hand(*args) -> bool:
    handed = _REAL_HAND(*args)
    _TAKEN["handed"] += handed
    return handed


def _counting_commit(*args) -> bool:
    committed = _REAL_COMMIT(*args)
    _TAKEN["committed"] += committed
    return committed


@settings(max_examples=40, deadline=None, derandomize=True)
@given(bursts())
def test_the_lean_page_chunk_is_the_reference(burst):
    trace, config = burst
    with (
        mock.patch.object(lean, "lean_hand_top_leaf", _counting_hand),
        mock.patch.object(lean, "lean_commit_page", _counting_commit),
    ):
        ours, our_states = watched_run(trace, config, True, lean=True)
    theirs, their_states = watched_run(trace, config, True, lean=False)
    assert len(our_states) == len(their_states)
    for index, (our_state, their_state) in enumerate(zip(our_states, their_states, strict=True)):
        assert our_state == their_state, f"after step {index}"
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary


# the property runs once, inside test_the_property_takes_the_lean_path (which asserts what its examples reach)
test_the_lean_page_chunk_is_the_reference.__test__ = False


def test_the_property_takes_the_lean_path():
    """The runs above hand many victims' slots over and commit many chunks through the lean functions."""
    _TAKEN.update(handed=0, committed=0)
    test_the_lean_page_chunk_is_the_reference()
    assert _TAKEN["handed"] > 100 and _TAKEN["committed"] > 1000, _TAKEN
