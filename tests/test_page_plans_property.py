"""``prepare_prefill`` plans a chunk of one whole page directly (``PageChunks.plan_page_chunk``: the reservation
asked only where a pool is short, the lone victim's slots handed over) where the rules take page chunks
(``marconi-vllm``); the general calls (``plans_page_chunks`` off) are the reference.

Timed runs of generated bursts (several requests' chunks beside decodes in one step, shared heads so that some
requests hit), pages 1, 2, 16 and 64, models with and without SWA, tight pools (every chunk evicts, some
requests are retracted) and the presets' own, bounds on and off: after every step the two runs' managers are
compared whole (``snapshot``: requests, nodes, locks, pools and their free ids; every node's stamps, the
clocks, the walk hints, the leaf heap's current entries), and at the end the tables and summaries. Each run
counts the plans taken directly and the victims' slots handed over, so the property is not met by never
taking the path.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from managers_watched import assert_watched_equal, managers_watched
from test_decode_fast_path_property import snapshot
from test_marconi_vllm_run_property import _stamps, current_entries

from sim.cache.engines import marconi_vllm as vllm_module
from sim.cache.engines import marconi_vllm_step as step_module
from sim.cache.engines.marconi_vllm import MarconiVllmRules
from sim.cache.page_chunks import PageChunks
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

_REAL_PLAN = PageChunks.plan_page_chunk
_REAL_HAND, _REAL_COMMIT = vllm_module.hand_top_leaf, vllm_module.commit_page
_TAKEN = {"plans": 0, "evicting": 0, "handed": 0, "committed": 0}

# the runs count and watch through patches of names the compiled core binds
pytestmark = pytest.mark.interpreted


@st.composite
def bursts(draw):
    """Requests of three families' heads and own parts arriving close together, and a run's settings."""
    page = draw(st.sampled_from([1, 2, 16, 64]))
    max_own = {1: 60, 2: 120}.get(page, 900)
    request = st.tuples(
        st.integers(0, 2),
        st.sampled_from([0, 40, 300]) if page > 2 else st.sampled_from([0, 8, 20]),
        st.integers(1, max_own),
        st.integers(2, 150),
        st.integers(0, 600),
    )
    requests = [
        Request(
            id=f"r{index}",
            arrival=arrival_ms / 1000,
            prompt=[Segment(ref=f"head{family}", len=head_len), Segment(ref=f"own{index}", len=own_len)]
            if head_len
            else [Segment(ref=f"own{index}", len=own_len)],
            output_len=output_len,
        )
        for index, (family, head_len, own_len, output_len, arrival_ms) in enumerate(
            draw(st.lists(request, min_size=3, max_size=8))
        )
    ]
    knobs = dict(
        page_size=page,
        track_interval=page,  # vLLM+ keeps a state at every page
        chunked_prefill_size=max(page, 16) * draw(st.integers(1, 8)),
        max_running_requests=draw(st.integers(2, 8)),
    )
    model = draw(st.sampled_from(["tiny", "inkling", "qwen3-next"]))
    longest = max(sum(segment.len for segment in r.prompt) + r.output_len for r in requests)
    pool_pages = -(-longest // page) + draw(st.sampled_from([2, 8, 30, 100]))  # the longest request fits
    pools = dict(pool_tokens=pool_pages * page, mamba_states=pool_pages) if draw(st.integers(0, 4)) else {}
    config = SimConfig(policy="marconi-vllm", model=model, knobs=knobs, bounds=draw(st.booleans()), **pools)
    return Trace(sorted(requests, key=lambda r: r.arrival)), config


def watched_run(trace: Trace, config: SimConfig, direct: bool):
    """The timed run with ``plans_page_chunks`` as given, and its manager's state after every step."""
    with (
        managers_watched(_state) as (_, states, step),
        mock.patch.object(PageChunks, "plans_page_chunks", direct),
        mock.patch.object(MarconiVllmRules, "page_steps", direct),
        # each reservation alone: the page path this test holds (a step's hold: test_marconi_vllm_step_property.py)
        mock.patch.object(step_module, "HOLDS_ACROSS_STEP", False),
    ):
        result = simulate(trace, config, on_step=step)
    return result, states


def _state(manager) -> tuple:
    return snapshot(manager), _stamps(manager), current_entries(manager), _hints(manager)


def _hints(manager) -> list[tuple]:
    deepest = manager.tree.hints._deepest
    return sorted((head, key.runs, node.start, node.end) for head, (key, node) in deepest.items())


def _counting_plan(manager, req, chunk_len):
    evictions = sum(manager.tree.num_evictions.values())
    plan = _REAL_PLAN(manager, req, chunk_len)
    _TAKEN["plans"] += plan is not None
    _TAKEN["evicting"] += plan is not None and sum(manager.tree.num_evictions.values()) > evictions
    return plan


def _counting_hand(*args) -> bool:
    handed = _REAL_HAND(*args)
    _TAKEN["handed"] += handed
    return handed


def _counting_commit(*args) -> bool:
    committed = _REAL_COMMIT(*args)
    _TAKEN["committed"] += committed
    return committed


@settings(max_examples=30, deadline=None, derandomize=True)
@given(bursts())
def test_a_page_chunk_planned_directly_is_the_general_plan(burst):
    trace, config = burst
    with (
        mock.patch.object(PageChunks, "plan_page_chunk", autospec=True, side_effect=_counting_plan),
        mock.patch.object(vllm_module, "hand_top_leaf", _counting_hand),
        mock.patch.object(vllm_module, "commit_page", _counting_commit),
    ):
        ours, our_states = watched_run(trace, config, True)
    theirs, their_states = watched_run(trace, config, False)
    assert_watched_equal(ours, our_states, theirs, their_states)


# the property runs once, inside test_the_property_plans_page_chunks (which also asserts what its examples reach)
test_a_page_chunk_planned_directly_is_the_general_plan.__test__ = False


def test_the_property_plans_page_chunks():
    """The runs above plan many page chunks directly, many of those evict the heap's top and take its slots,
    and many commit through the run's statements."""
    _TAKEN.update(plans=0, evicting=0, handed=0, committed=0)
    test_a_page_chunk_planned_directly_is_the_general_plan()
    assert _TAKEN["plans"] > 1000 and _TAKEN["evicting"] > 300, _TAKEN
    assert _TAKEN["handed"] > 100 and _TAKEN["committed"] > 1000, _TAKEN
