"""SGLang's budget counts the tree's locked pages with ``locked_pages_shared`` (each FULL path walked up only to
where an earlier holder's walk reached); ``locked_pages`` (every holder's whole path) is the reference. Every
budget check of generated bursts (pages 1 and 64, SWA and not, pools tight enough to evict, retract and
chunk) is asked of both, which must agree. The floor on paths that share nodes rests on a fixed burst, not on
what the generated bursts reach (those moved with the test order until ``tests/hypothesis_pins.py``)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sim.cache.engines.sglang_admission as admission
from sim.cache.engines.sglang_locked import locked_pages, locked_pages_shared
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from tests.prefix_bursts import (
    FIXED_BURST,
    SHARED_KNOBS,
    draw_prefix_requests,
    draw_sglang_knobs,
    paths_share_nodes,
)

CHECKS = {"calls": 0, "shared": 0}


def checked_locked_pages(manager, candidate, swa: bool) -> int:
    """The fast count, asserted equal to the reference at each call."""
    shared, reference = locked_pages_shared(manager, candidate, swa), locked_pages(manager, candidate, swa)
    assert shared == reference, (shared, reference, swa)
    CHECKS["calls"] += 1
    CHECKS["shared"] += not swa and paths_share_nodes(manager)
    return shared


@st.composite
def bursts(draw):
    """Requests sharing prefixes (a chained trace of turns), the page, the model (SWA or not) and the pool."""
    num_requests = draw(st.integers(3, 12))
    requests = draw_prefix_requests(draw, num_requests, num_requests)
    # not marconi-sglang: its SWA count is Marconi's own (tests/test_marconi_swa_budget.py)
    policy = draw(st.sampled_from(["sglang", "sglang-retain", "sglang-retain-tree"]))
    page = draw(st.sampled_from([1, 64]))
    knobs = draw_sglang_knobs(draw, page)
    model = draw(st.sampled_from(["inkling", "qwen3-next"]))  # SWA windows, or FULL and MAMBA alone
    pool_tokens = draw(st.sampled_from([3000, 6000, 12000]))
    return Trace(sorted(requests, key=lambda r: r.arrival)), policy, model, knobs, pool_tokens


# the first example alone meets the floor below (347 budget checks with shared paths): it rests on that example
@pytest.mark.interpreted  # patches a module global the compiled core binds
@settings(max_examples=30, deadline=None, derandomize=True)
@given(bursts())
@example((FIXED_BURST, "sglang", "inkling", SHARED_KNOBS, 12000))
@example((FIXED_BURST, "sglang-retain", "qwen3-next", SHARED_KNOBS, 12000))
def test_the_shared_walk_counts_what_every_path_counts(burst):
    trace, policy, model, knobs, pool_tokens = burst
    config = SimConfig(policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=48)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(admission, "locked_pages_shared", checked_locked_pages)
        simulate(trace, config)


# the property runs once, inside the test below, which counts what its own run reached: collected on its own
# too, xdist could run it on the other worker, leaving the floor to whatever that worker's counts held
test_the_shared_walk_counts_what_every_path_counts.__test__ = False


@pytest.mark.interpreted
def test_the_generated_bursts_ask_the_budget_with_pages_locked():
    """The property above is exercised: the budget was asked while running requests shared their paths."""
    before = dict(CHECKS)
    test_the_shared_walk_counts_what_every_path_counts()
    reached = {key: CHECKS[key] - before[key] for key in CHECKS}
    assert reached["shared"] > 200, reached
