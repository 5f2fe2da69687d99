"""A timed step's held parent that is not the heap's top (``marconi_vllm_step.hand_in_step``: an older or equal
entry on the heap, the heap due for compaction, the leaf locked) is pushed before the top is asked, as the
eviction would have pushed it; the switch off (``HOLDS_ACROSS_STEP``, each reservation alone) is the reference.

The generated bursts of ``test_marconi_vllm_step_property.py`` reach a held entry that is not the top, but not one
that is current with no current twin on the heap (the parent's own entry at the same stamp): there, an entry
dropped instead of pushed is a duplicate and nothing shows it. Here a small fixed workload (three shared heads,
prompts of 300 to 1,800 tokens, outputs crossing blocks, arrivals overlapping; ``qwen3-next``) reaches the other
case on each of two pools: on 1,600 tokens the older entries are current (the same victim, and the dropped leaf has
no entry left: the heap's current entries part), on 2,400 they are stale (dropped first, the held parent would be
the victim: another leaf is evicted, and the requests' hits and the steps part). After every step the two runs'
managers are compared whole (``test_page_plans_property._state``: the leaf heap's current entries among them, every
leaf of the tree having one) and checked (``check_integrity``); at the end the tables and summaries (the evictions'
counts among them). The runs count the held entries reached that are not the top and would be lost if not pushed,
so the property is not met by never reaching them.
"""

from __future__ import annotations

from unittest import mock

import pytest
from managers_watched import assert_watched_equal, managers_watched
from test_page_plans_property import _state

from sim.cache.engines import marconi_vllm_step as step_module
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

_REAL_HOLDS = step_module.holds_the_top
_REACHED = {"asked": 0, "not_top": 0, "lone": 0}

# the runs count through a patch of a name the compiled core binds
pytestmark = pytest.mark.interpreted


def _trace() -> Trace:
    """Three shared heads, prompts of 300 to 1,800 tokens, outputs crossing blocks, arrivals overlapping."""
    return Trace(
        [
            Request(
                id=f"r{i}",
                arrival=i * 0.015,
                prompt=[
                    Segment(ref=f"sys{i % 3}", len=300 + 40 * (i % 4)),
                    Segment(ref=f"u{i}", len=50 + 90 * i),
                ],
                output_len=20 + 11 * i,
            )
            for i in range(16)
        ]
    )


def _counting_holds(held, leaves, stamps) -> bool:
    """``holds_the_top``, counting the held entries it answers False for that are the leaf's only current
    entry (alive, childless, at its stamp, no entry of the same node and stamp on the heap)."""
    holds = _REAL_HOLDS(held, leaves, stamps)
    _REACHED["asked"] += 1
    if not holds:
        stamp, node_id, node = held
        _REACHED["not_top"] += 1
        current = node.alive and not node.children and stamps.get(node_id, 0) == stamp
        twin = any(entry[2] is node and entry[0] == stamp for entry in leaves.heap)
        _REACHED["lone"] += current and not twin
    return holds


def _checked_state(manager) -> tuple:
    manager.check_integrity()
    return _state(manager)


def _run(config: SimConfig, holds: bool):
    """The timed run with ``HOLDS_ACROSS_STEP`` as given: its result and its manager's state after every step."""
    with (
        managers_watched(_checked_state) as (_, states, step),
        mock.patch.object(step_module, "HOLDS_ACROSS_STEP", holds),
        mock.patch.object(step_module, "holds_the_top", _counting_holds),
    ):
        result = simulate(_trace(), config, on_step=step)
    return result, states


@pytest.mark.parametrize("pool_tokens", [1600, 2400])
def test_a_held_parent_not_on_top_is_pushed(pool_tokens):
    _REACHED.update(asked=0, not_top=0, lone=0)
    config = SimConfig(
        policy="marconi-vllm", model="qwen3-next", mode="timed", bounds=False, pool_tokens=pool_tokens
    )
    ours, our_states = _run(config, True)
    reached = dict(_REACHED)
    theirs, their_states = _run(config, False)
    assert reached["not_top"] > 5 and reached["lone"] >= 1, reached
    assert ours.summary["evictions_full"] > 300
    assert_watched_equal(ours, our_states, theirs, their_states)
