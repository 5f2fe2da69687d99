"""A timed step's steady page chunks planned in one loop and committed in one loop (``steady_step.STEP_AT_ONCE``)
against one call per chunk (the switch off: Round 45's ``add_steady`` and ``commit_steady`` per item, the
reference).

``test_page_plans_property.py``'s generated bursts (several requests' page chunks beside decodes in one step,
pages 1-64, SWA and not, tight pools where every chunk evicts and some requests are retracted, bounds on and
off): after every step the two runs' managers are compared whole, and at the end the tables and summaries;
the real conversation trace's head, timed, gives the same tables; a run listened to tells the same events in
the same order. The runs count the chunks the loop planned, those that reserved (evicting or refused), the
steps committed in one loop and the leaves they hung, so the property is not met by never taking the path.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from managers_watched import assert_watched_equal, managers_watched
from test_marconi_vllm_steady_property import _long_prompts
from test_page_plans_property import _state, bursts

from sim.run.simulate import SimConfig, simulate
from sim.sched import default as default_module
from sim.sched import steady_step as step_module
from sim.trace import Request, Segment, Trace
from sim.trace.azure_import import import_mooncake

_REAL_ADD, _REAL_COMMIT_STEP = step_module.add_steady_step, step_module.commit_steady_step
_REAL_RESERVE, _REAL_HANG = step_module.reserve_steady, step_module.commit_chunk
_REAL_HAND, _REAL_PAST_HOLD = step_module.hand_in_step, step_module.page_past_hold
_TAKEN = {"planned": 0, "reserved": 0, "refused": 0, "steps": 0, "leaves": 0, "in_step": 0}

# the runs count through patches of names the compiled core binds
pytestmark = pytest.mark.interpreted


def _counting_add(steady, capped, batch, runs, budget, add_prefill):
    planned = sum(item.is_prefill for item in batch.items)
    left = _REAL_ADD(steady, capped, batch, runs, budget, add_prefill)
    _TAKEN["planned"] += sum(item.is_prefill for item in batch.items) - planned
    return left


def _counting_reserve(manager, rules, num_swa):
    refusal = _REAL_RESERVE(manager, rules, num_swa)
    _TAKEN["reserved"] += 1
    _TAKEN["refused"] += refusal is not None
    return refusal


def _counting_hand(hold, rules, manager, swa_pages):
    handed = _REAL_HAND(hold, rules, manager, swa_pages)
    _TAKEN["reserved"] += handed
    _TAKEN["in_step"] += handed  # the held victim taken in the loop, not only the general reservation
    return handed


def _counting_past_hold(manager, rules, hold, num_swa):
    refusal = _REAL_PAST_HOLD(manager, rules, hold, num_swa)
    _TAKEN["reserved"] += 1
    _TAKEN["refused"] += refusal is not None
    return refusal


def _counting_commit_step(steady, batch, running):
    _TAKEN["steps"] += 1
    return _REAL_COMMIT_STEP(steady, batch, running)


def _counting_hang(manager, tree, req, end, rules, has_swa, keys):
    node = _REAL_HANG(manager, tree, req, end, rules, has_swa, keys)
    _TAKEN["leaves"] += node is not None
    return node


def step_run(trace: Trace, config: SimConfig, at_once: bool, on_step=None):
    """The timed run with ``STEP_AT_ONCE`` as given (counted where on)."""
    with (
        mock.patch.object(step_module, "STEP_AT_ONCE", at_once),
        mock.patch.object(step_module, "add_steady_step", _counting_add),
        mock.patch.object(step_module, "reserve_steady", _counting_reserve),
        mock.patch.object(step_module, "hand_in_step", _counting_hand),
        mock.patch.object(step_module, "page_past_hold", _counting_past_hold),
        mock.patch.object(step_module, "commit_chunk", _counting_hang),
        mock.patch.object(default_module, "commit_steady_step", _counting_commit_step),
    ):
        return simulate(trace, config, on_step=on_step)


def watched_run(trace: Trace, config: SimConfig, at_once: bool):
    """``step_run`` and its manager's state after every step."""
    with managers_watched(_state) as (_, states, step):
        result = step_run(trace, config, at_once, step)
    return result, states


@settings(max_examples=40, deadline=None, derandomize=True)
@given(bursts())
def test_a_step_in_one_loop_is_each_chunk_in_its_own_calls(burst):
    trace, config = burst
    ours, our_states = watched_run(trace, config, True)
    theirs, their_states = watched_run(trace, config, False)
    assert_watched_equal(ours, our_states, theirs, their_states)


# the property runs once, inside test_the_property_takes_steps_in_one_loop (which also asserts what it reaches)
test_a_step_in_one_loop_is_each_chunk_in_its_own_calls.__test__ = False


def test_the_property_takes_steps_in_one_loop():
    """The runs above plan many page chunks in the loop, many reserving (some refused: a retraction follows),
    and commit many steps in one loop, hanging many leaves."""
    _TAKEN.update(planned=0, reserved=0, refused=0, steps=0, leaves=0, in_step=0)
    test_a_step_in_one_loop_is_each_chunk_in_its_own_calls()
    assert _TAKEN["planned"] > 3000 and _TAKEN["reserved"] > 500 and _TAKEN["refused"] > 200, _TAKEN
    assert _TAKEN["steps"] > 1000 and _TAKEN["leaves"] > 3000, _TAKEN


def test_long_prompts_beside_decodes_take_the_loop():
    """A burst of long prompts in a small pool (every chunk evicts): equal whole, most chunks in the loops."""
    trace, config = _long_prompts()
    _TAKEN.update(planned=0, reserved=0, refused=0, steps=0, leaves=0, in_step=0)
    ours, our_states = watched_run(trace, config, True)
    reached = dict(_TAKEN)
    theirs, their_states = watched_run(trace, config, False)
    assert_watched_equal(ours, our_states, theirs, their_states)
    assert reached["planned"] > 400 and reached["reserved"] > 250 and reached["leaves"] > 400, reached
    assert reached["in_step"] > 150, reached  # the held victims taken in the loop (274 read)


def test_the_real_trace_head_gives_the_same_tables(shared_traces):
    """The conversation trace's first 60 requests, ``marconi-vllm`` timed with bounds: the same tables."""
    trace = import_mooncake(
        str(shared_traces / "mooncake" / "conversation_trace.jsonl"), limit=60, chains=True
    )
    config = SimConfig(policy="marconi-vllm", mode="timed", bounds=True)
    _TAKEN.update(planned=0, reserved=0, refused=0, steps=0, leaves=0, in_step=0)
    ours = step_run(trace, config, True)
    reached = dict(_TAKEN)
    theirs = step_run(trace, config, False)
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary
    assert reached["planned"] > 10000 and reached["reserved"] > 1000 and reached["leaves"] > 10000, reached


def test_the_loops_tell_listeners_what_each_chunks_calls_tell():
    """Listened to, the loops tell every cache event the per-chunk calls tell, in the same order."""
    import sim.run.simulate as simulate_module
    from sim.cache import events

    kinds = (events.Matched, events.Admitted, events.Inserted, events.SwaFreed, events.CheckpointSaved)
    kinds += (events.FinishStarted, events.Finished, events.Aborted, events.SlotsFreed, events.Retracted)
    make_manager = simulate_module.make_manager

    def told_run(at_once: bool) -> list:
        told: list = []

        def make_and_listen(model, policy, sizes, bus, **how):
            for kind in kinds:
                bus.subscribe(kind, told.append)
            return make_manager(model, policy, sizes, bus, **how)

        trace, config = _long_prompts()
        with mock.patch.object(simulate_module, "make_manager", make_and_listen):
            step_run(trace, config, at_once)
        return told

    _TAKEN.update(planned=0, reserved=0, refused=0, steps=0, leaves=0, in_step=0)
    ours = told_run(True)
    assert _TAKEN["planned"] > 400 and _TAKEN["steps"] > 100, _TAKEN  # listened to, still the loops
    theirs = told_run(False)
    saved = [event for event in ours if isinstance(event, events.CheckpointSaved)]
    assert len(saved) > 400 and ours == theirs


def test_the_loops_start_each_step_with_the_same_batch():
    """Listened to at each step's start (``StepStarted``), the batches are the same item by item: the plans, the
    kinds and the first chunks' state copies (a chunk refused its pages keeps its copy for the next step's)."""
    import sim.run.simulate as simulate_module
    from sim.cache import events

    make_manager = simulate_module.make_manager

    def batches_run(trace: Trace, config: SimConfig, at_once: bool) -> list:
        started: list = []

        def on_start(event) -> None:
            started.append([(i.plan, i.is_prefill, i.copy_state_from) for i in event.batch.items])

        def make_and_listen(model, policy, sizes, bus, **how):
            bus.subscribe(events.StepStarted, on_start)
            return make_manager(model, policy, sizes, bus, **how)

        with mock.patch.object(simulate_module, "make_manager", make_and_listen):
            step_run(trace, config, at_once)
        return started

    for trace, config in (_long_prompts(), _copies()):
        _TAKEN.update(planned=0, reserved=0, refused=0, steps=0, leaves=0, in_step=0)
        ours = batches_run(trace, config, True)
        assert _TAKEN["planned"] > 100, _TAKEN
        theirs = batches_run(trace, config, False)
        assert ours == theirs
        assert any(copy is not None for items in ours for _, prefill, copy in items if prefill)


def _copies() -> tuple[Trace, SimConfig]:
    """Follow-ups of a shared head (admitted with a state to copy) in a pool too small for every first chunk:
    some first chunks are refused at admission and go to a later step's loop with their copy."""
    requests = [
        Request(
            id=f"r{index}",
            arrival=index * 0.001,
            prompt=[Segment(ref="head", len=512), Segment(ref=f"own{index}", len=400)],
            output_len=30,
        )
        for index in range(12)
    ]
    knobs = dict(page_size=16, track_interval=16, chunked_prefill_size=200, max_running_requests=8)
    config = SimConfig(
        policy="marconi-vllm", model="inkling", knobs=knobs, pool_tokens=90 * 16, mamba_states=90
    )
    return Trace(requests), config
