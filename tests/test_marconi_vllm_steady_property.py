"""A timed step's steady page chunks sized, planned and committed in one call each
(``marconi_vllm_steady.STEADY_CHUNKS``) against the manager's general calls (the switch off, the reference).

``test_page_plans_property.py``'s generated bursts (several requests' page chunks beside decodes in one step,
pages 1-64, SWA and not, tight pools where every chunk evicts and some requests are retracted, bounds on and
off): after every step the two runs' managers are compared whole (requests, nodes, locks, pools and their free
ids, stamps, clocks, walk hints, the leaf heap's current entries), and at the end the tables and summaries. The
runs count the chunks planned in one call, those that evicted, and the commits that hung a leaf in one call,
so the property is not met by never taking the path.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from managers_watched import assert_watched_equal, managers_watched
from test_page_plans_property import _state, bursts

from sim.cache.engines import marconi_vllm_steady as steady_module
from sim.cache.manager import CacheManager
from sim.run.simulate import SimConfig, simulate
from sim.sched import default as default_module
from sim.sched import steady_chunks as steady_chunks_module
from sim.trace import Request, Segment, Trace

_REAL_PLAN, _REAL_COMMIT = steady_module.plan_steady, steady_module.commit_steady
_TAKEN = {"plans": 0, "evicting": 0, "refused": 0, "leaves": 0}

# the runs count through patches of names the compiled core binds
pytestmark = pytest.mark.interpreted


def _counting_plan(manager, rules, req, budget):
    evictions = sum(manager.tree.num_evictions.values())
    plan = _REAL_PLAN(manager, rules, req, budget)
    taken = plan is not None and hasattr(plan, "checkpoints")
    _TAKEN["plans"] += taken
    _TAKEN["refused"] += plan is not None and not taken
    _TAKEN["evicting"] += taken and sum(manager.tree.num_evictions.values()) > evictions
    return plan


def _counting_commit(manager, rules, request_id, chunk_len):
    nodes = manager.tree.num_full_pages
    _REAL_COMMIT(manager, rules, request_id, chunk_len)
    _TAKEN["leaves"] += manager.tree.num_full_pages == nodes + 1 and chunk_len == manager.page_size
    return None


def steady_run(trace: Trace, config: SimConfig, steady: bool):
    """The timed run with ``STEADY_CHUNKS`` as given, and its manager's state after every step."""
    with (
        managers_watched(_state) as (_, states, step),
        mock.patch.object(steady_module, "STEADY_CHUNKS", steady),
        mock.patch.object(steady_chunks_module, "plan_steady", _counting_plan),
        mock.patch.object(default_module, "commit_steady", _counting_commit),
    ):
        result = simulate(trace, config, on_step=step)
    return result, states


@settings(max_examples=40, deadline=None, derandomize=True)
@given(bursts())
def test_a_steady_chunk_in_one_call_is_the_general_calls(burst):
    trace, config = burst
    ours, our_states = steady_run(trace, config, True)
    theirs, their_states = steady_run(trace, config, False)
    assert_watched_equal(ours, our_states, theirs, their_states)


# the property runs once, inside test_the_property_takes_steady_chunks (which also asserts what its examples reach)
test_a_steady_chunk_in_one_call_is_the_general_calls.__test__ = False


def test_the_property_takes_steady_chunks():
    """The runs above plan many page chunks in one call, many of them evicting for their slots, some refused
    (a retraction follows), and commit many as one new leaf in one call."""
    _TAKEN.update(plans=0, evicting=0, refused=0, leaves=0)
    test_a_steady_chunk_in_one_call_is_the_general_calls()
    assert _TAKEN["plans"] > 3000 and _TAKEN["evicting"] > 500 and _TAKEN["refused"] > 200, _TAKEN
    assert _TAKEN["leaves"] > 3000, _TAKEN


def _long_prompts() -> tuple[Trace, SimConfig]:
    """Long prompts of two families beside decodes in a small pool: every page chunk evicts."""
    requests = [
        Request(
            id=f"r{index}",
            arrival=index * 0.002,
            prompt=[Segment(ref=f"head{index % 2}", len=256), Segment(ref=f"own{index}", len=900)],
            output_len=40,
        )
        for index in range(8)
    ]
    knobs = dict(page_size=16, track_interval=16, chunked_prefill_size=256, max_running_requests=6)
    config = SimConfig(
        policy="marconi-vllm", model="inkling", knobs=knobs, pool_tokens=160 * 16, mamba_states=160
    )
    return Trace(requests), config


def test_long_prompts_beside_decodes_take_the_steady_path():
    """A burst of long prompts in a small pool: equal whole, and most chunks planned and committed in one call."""
    trace, config = _long_prompts()
    _TAKEN.update(plans=0, evicting=0, refused=0, leaves=0)
    ours, our_states = steady_run(trace, config, True)
    reached = dict(_TAKEN)
    theirs, their_states = steady_run(trace, config, False)
    assert_watched_equal(ours, our_states, theirs, their_states)
    assert reached["plans"] > 400 and reached["evicting"] > 250 and reached["leaves"] > 400, reached


def test_a_wrapped_prepare_prefill_keeps_every_chunk_general():
    """A probe that wraps the manager's ``prepare_prefill`` (tests/executor/cache_probe.py) sees every chunk:
    the one-call path stands aside where the manager's own calls are not its class's."""
    trace, config = _long_prompts()
    seen = []
    real = CacheManager.prepare_prefill

    def probed(manager, request_id, *args):
        seen.append(request_id)
        return real(manager, request_id, *args)

    _TAKEN.update(plans=0, evicting=0, refused=0, leaves=0)
    with mock.patch.object(CacheManager, "prepare_prefill", probed):
        ours, _ = steady_run(trace, config, True)
    theirs, _ = steady_run(trace, config, False)
    assert _TAKEN["plans"] == 0 and len(seen) > 300
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)


def test_the_steady_path_tells_listeners_what_the_general_calls_tell():
    """Listened to, the one-call path tells every cache event the general calls tell, in the same order: the
    checkpoint each chunk saves (``CheckpointSaved``), the inserts, the SWA frees, the retractions and the ends."""
    import sim.run.simulate as simulate_module
    from sim.cache import events

    kinds = (events.Matched, events.Admitted, events.Inserted, events.SwaFreed, events.CheckpointSaved)
    kinds += (events.FinishStarted, events.Finished, events.Aborted, events.SlotsFreed, events.Retracted)
    make_manager = simulate_module.make_manager

    def told_run(steady: bool) -> list:
        told: list = []

        def make_and_listen(model, policy, sizes, bus, **how):
            for kind in kinds:
                bus.subscribe(kind, told.append)
            return make_manager(model, policy, sizes, bus, **how)

        trace, config = _long_prompts()
        with mock.patch.object(simulate_module, "make_manager", make_and_listen):
            steady_run(trace, config, steady)
        return told

    _TAKEN.update(plans=0, evicting=0, refused=0, leaves=0)
    ours = told_run(True)
    assert _TAKEN["plans"] > 400, _TAKEN  # listened to, the chunks still take the one-call path
    theirs = told_run(False)
    saved = [event for event in ours if isinstance(event, events.CheckpointSaved)]
    assert len(saved) > 400 and ours == theirs
