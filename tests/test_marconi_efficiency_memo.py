"""Marconi's FLOP efficiency is remembered per (parent end, end) (``NodeCost.efficiency``): every eviction
scores every candidate. What it answers must be the formula's value whatever it remembers, including after it
forgets (its memory is capped), for both readings of the formula."""

from __future__ import annotations

from cache_helpers import hybrid_model
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.engines import marconi_flops
from sim.cache.engines.marconi_flops import NodeCost

CAP = 7  # forget often: answers after a forget count too
# small ranges: pairs share an end or a parent end often (a memory keyed on less than both is caught)
ends = st.tuples(st.integers(0, 12), st.integers(1, 12), st.sampled_from([1, 997])).map(
    lambda p: (p[0] * p[2], (p[0] + p[1]) * p[2])
)


@settings(max_examples=80, deadline=None)
@given(follows=st.sampled_from(["paper", "code"]), pairs=st.lists(ends, min_size=1, max_size=60))
def test_remembered_efficiency_is_the_formula(follows, pairs):
    cost = NodeCost(hybrid_model(), 512, follows)
    original, marconi_flops._MAX_REMEMBERED = marconi_flops._MAX_REMEMBERED, CAP
    try:
        for parent_end, end in pairs + pairs[::-1]:
            held = cost.held_bytes(parent_end, end)
            assert cost.efficiency(parent_end, end) == cost.saved(parent_end, end) / held
        assert len(cost.remembered) <= CAP
    finally:
        marconi_flops._MAX_REMEMBERED = original
