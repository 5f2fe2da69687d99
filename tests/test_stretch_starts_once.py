"""The batch runs' two leaner moves (``sim/sched/batch.py``'s ``PAGE_STARTS_ONCE``: a quiet stretch's take gets the
page starts its question computed, ``batch_decode_stretch``; ``sim/sched/loop_runs.py``'s ``EVENT_BATCH_WHEN_READ``:
an event step builds its batch only where the bounds read it, and ``LEAN_QUIET_REQUESTS``: its requests
whose step is quiet only move on, where the bounds read the batch too: ``EVENT_BATCH_FROM_LENGTHS``) leave every table as both switches off, the reference.
Generated bursts on the loops that take quiet stretches (the default loop's ``no-cache`` and ``marconi-vllm``,
FreeToken's, SGLang's ``radix`` and ``sglang-retain``) at pages 1/2/16/64, bounds on and off, on tight and roomy
pools. Every handed list of starts is asserted equal to what the take would compute itself; the fixed bursts put
floors on how many were handed and how many event steps went without a batch (none with the bounds listening)."""

from __future__ import annotations

from collections import Counter
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.plain_decodes import PlainDecodes
from sim.run.simulate import SimConfig, simulate
from sim.sched import batch as batch_module
from sim.sched import loop_runs, sglang_carried
from sim.trace import Request, Segment, Trace
from tests.fast_slow_helpers import burst_requests, growing_burst

_TAKE = PlainDecodes.take_batch_decodes
_STRETCH = PlainDecodes.batch_decode_stretch
_EVENT_STEP = loop_runs._event_step
_QUIET_OR_PLANNED = loop_runs._quiet_or_planned

# the counts go through patches the compiled core would not see
pytestmark = [pytest.mark.interpreted, pytest.mark.usefixtures("default_loop_no_cache")]  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)

POLICIES = ["no-cache", "marconi-vllm", "freetoken", "radix", "sglang-retain"]


@pytest.fixture(autouse=True, scope="module")
def _stretches_stop_at_swa_frees():
    """The quiet stretch's switches are the subject here: ``no-cache``'s stretches stop at each SWA free, as
    before freeing stretches (``loop_runs.FOLD_SWA_FREES``, held to this by ``tests/test_swa_free_runs.py``)."""
    with mock.patch.object(loop_runs, "FOLD_SWA_FREES", False):
        yield


@pytest.fixture(autouse=True, scope="module")
def _stretches_asked_of_the_rules():
    """An SGLang run's stretches asked through ``batch_decode_stretch``, which the counts here watch: the carried
    silent steps answer them without it (``sglang_carried.CARRY_SILENT_STEPS``, held to this by
    ``tests/test_sglang_carried_property.py``)."""
    with mock.patch.object(sglang_carried, "CARRY_SILENT_STEPS", False):
        yield


@st.composite
def bursts(draw):
    """Requests arriving close together, and a run's knobs and pools."""
    requests = burst_requests(draw, draw(st.integers(3, 12)), 2500, 900, 400)
    policy = draw(st.sampled_from(POLICIES))
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs: dict = dict(page_size=page, max_running_requests=draw(st.integers(2, 12)))
    if policy == "marconi-vllm":  # vLLM+: a state at every page, the track interval a multiple of it
        knobs.update(track_interval=max(page, 16) * 4)
    else:
        knobs.update(
            track_interval=64 * draw(st.integers(1, 4)),
            swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128])),
            chunked_prefill_size=max(page, 16) * draw(st.integers(4, 32)),
        )
    pool_tokens = draw(st.sampled_from([0, 3000, 12000, 40000]))
    return Trace(sorted(requests, key=lambda r: r.arrival)), policy, knobs, pool_tokens, draw(st.booleans())


def leaner_equals_reference(
    trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool
) -> Counter:
    """The run with both switches on, its handed starts checked as it goes, asserted equal table by table to the
    run with both off; returns its counts: ``handed`` (stretches given their starts), ``event_steps``, and
    ``no_batch`` (event steps without a batch), ``quiet`` (requests of those only moved on), ``cut`` (stretches whose starts were cut where pages ran short)."""
    pools = (
        dict(pool_tokens=pool_tokens, mamba_states=400 if policy == "marconi-vllm" else 48)
        if pool_tokens
        else {}
    )
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds, **pools)
    counts: Counter = Counter()

    def take(manager, reqs, num_steps, starts=None):
        if starts is not None:
            assert starts == (manager.page_starts(reqs, num_steps) or []), "stale or wrong page starts handed"
            counts["handed"] += 1
        return _TAKE(manager, reqs, num_steps, starts)

    def stretch(manager, reqs, iteration, max_steps):
        steps, starts = _STRETCH(manager, reqs, iteration, max_steps)
        room = manager.batch_run_room(reqs)
        # one step more would start more pages than the room: the question cut its starts there
        counts["cut"] += starts is not None and len(manager.page_starts(reqs, steps + 1) or []) > room
        return steps, starts

    def event_step(*args):
        batch = _EVENT_STEP(*args)
        counts["event_steps"] += 1
        counts["no_batch"] += batch is None
        return batch

    def quiet_or_planned(*args):
        plan = _QUIET_OR_PLANNED(*args)
        counts["quiet"] += plan is None
        return plan

    with (
        mock.patch.object(loop_runs, "_quiet_or_planned", side_effect=quiet_or_planned),
        mock.patch.object(PlainDecodes, "take_batch_decodes", autospec=True, side_effect=take),
        mock.patch.object(PlainDecodes, "batch_decode_stretch", autospec=True, side_effect=stretch),
        mock.patch.object(loop_runs, "_event_step", side_effect=event_step),
    ):
        leaner = simulate(trace, config)
    with (
        mock.patch.object(batch_module, "PAGE_STARTS_ONCE", False),
        mock.patch.object(loop_runs, "EVENT_BATCH_WHEN_READ", False),
        mock.patch.object(loop_runs, "LEAN_QUIET_REQUESTS", False),
    ):
        reference = simulate(trace, config)
    assert leaner.requests.equals(reference.requests)
    assert leaner.steps.equals(reference.steps)
    assert leaner.summary == reference.summary
    return counts


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(bursts())
def test_leaner_stretches_and_event_steps_change_no_table(case):
    leaner_equals_reference(*case)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(bursts())
def test_leaner_stretches_and_event_steps_change_no_table_quick(case):
    leaner_equals_reference(*case)


@pytest.mark.parametrize("page", [2, 16, 64])
@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm", "freetoken", "radix"])
def test_a_growing_burst_hands_its_starts_on(policy, page):
    """Requests of different lengths decoding together: their stretches start pages at different steps, so the
    question computes starts and hands them on, bounds on and off."""
    knobs = dict(page_size=page, track_interval=64 * max(1, page // 16))
    for bounds in (False, True):
        assert leaner_equals_reference(Trace(growing_burst(6)), policy, knobs, 0, bounds)["handed"] >= 5


@pytest.mark.parametrize("page", [1, 16, 64])
@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm", "freetoken"])
def test_event_steps_go_without_a_batch_only_where_nobody_reads_it(policy, page):
    """The loops of ``take_loop_run`` take event steps (SWA frees, checkpoints): without a batch where the bounds
    are off, each with its batch where they listen; either way a quiet request only moves on
    (``EVENT_BATCH_FROM_LENGTHS``: the batch keeps its length)."""
    knobs = dict(page_size=page, track_interval=64 * max(1, page // 16))
    unread = leaner_equals_reference(Trace(growing_burst(6)), policy, knobs, 0, bounds=False)
    assert unread["event_steps"] >= 10 and unread["no_batch"] == unread["event_steps"]
    # a request's step inside a page is quiet unless its own event is due; at page 1 every step starts a page;
    # FreeToken's event steps here have every request's event due (none quiet)
    if policy != "freetoken":
        assert unread["quiet"] >= 100 if page > 1 else unread["quiet"] == 0
    read = leaner_equals_reference(Trace(growing_burst(6)), policy, knobs, 0, bounds=True)
    assert read["event_steps"] >= 10 and read["no_batch"] == 0
    if policy != "freetoken":
        assert read["quiet"] >= 100 if page > 1 else read["quiet"] == 0


@pytest.mark.parametrize("policy", ["radix", "freetoken", "marconi-vllm"])
def test_tight_pools_cut_stretches_where_a_page_would_not_fit(policy):
    """Pools that cut stretches short of their steps (``batch_decode_stretch``'s cut at the first page that would
    not fit): the starts handed are those before it, and the tables stay equal."""
    knobs = dict(page_size=16, track_interval=64, chunked_prefill_size=512, max_running_requests=8)
    if policy == "marconi-vllm":
        knobs = dict(page_size=16, track_interval=64)
    counts = leaner_equals_reference(Trace(growing_burst(10)), policy, knobs, 5000, bounds=False)
    assert counts["cut"] >= 1 and counts["handed"] >= 5


@pytest.mark.parametrize("policy", ["radix", "freetoken"])
def test_twins_cut_a_step_whose_pages_do_not_all_fit(policy):
    """Requests of one length arriving together start their pages at the same steps: the pools run short inside
    such a step, whose earlier requests' starts the cut must leave out too."""
    twins = [
        Request(id=f"r{index}", arrival=0.0, output_len=900, prompt=[Segment(ref=f"r{index}", len=1000)])
        for index in range(6)
    ]
    knobs = dict(page_size=16, track_interval=64, chunked_prefill_size=512, max_running_requests=8)
    assert leaner_equals_reference(Trace(twins), policy, knobs, 4000, bounds=False)["cut"] >= 1
