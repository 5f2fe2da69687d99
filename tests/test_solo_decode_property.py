"""Solo decode runs (a request decoding alone, replay mode's path) allocate the pages their steps start in
one go; that leaves every cache exactly as step-by-step decoding does also when the pools run out part-way:
the run must stop where a step would first evict (or be refused), with the engine's slack kept free.

The same two managers as ``test_decode_fast_path_property.py`` (one through ``advance_decode``, one step by
step), compared whole after every segment, but on pools of a few dozen pages and states, so that runs end
on a full pool, evictions happen in between and some requests are refused; Marconi also on one byte budget.
"""

from __future__ import annotations

from cache_helpers import hybrid_model, seq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode_fast_path_property import RADIX_PRESETS, Run, snapshot

from sim.cache.byte_budget import unit_bytes
from sim.cache.sizing import PoolSizes
from sim.engines.registry import PRESETS, make_policy
from sim.tokens import TokenSeq


@st.composite
def tight_runs(draw):
    page = draw(st.sampled_from([1, 2, 16, 32]))
    preset = draw(st.sampled_from(RADIX_PRESETS))
    knobs = dict(
        page_size=page,
        track_interval=page * draw(st.integers(1, 5)),
        swa_eviction_interval=draw(st.integers(1, 40)),
        swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
        chunked_prefill_size=page * draw(st.integers(2, 8)),
        mamba_chunk=page * (draw(st.integers(1, 3)) if page >= 16 else 16),
    )
    model = hybrid_model(swa=draw(st.booleans()), mamba=draw(st.booleans()), window=draw(st.integers(17, 90)))
    tokens_per_pool = draw(st.integers(6, 40)) * 16
    sizes = PoolSizes(-(-tokens_per_pool // page), -(-tokens_per_pool // page), draw(st.integers(3, 12)))
    if PRESETS[preset].engine == "marconi" and draw(st.booleans()):
        units = unit_bytes(model, page)
        budget = sizes.full_pages * (units[0] + units[1]) + 4 * units[2]
        sizes = PoolSizes(10**6, 10**6, 10**6, budget_bytes=budget, unit_bytes=units)
    return preset, model, knobs, sizes


def _tokens(index: int, shared_len: int, own_len: int, output_len: int) -> TokenSeq:
    rid = f"r{index}"
    return seq(("shared", shared_len), (rid, own_len), ("out-" + rid, output_len))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    tight_runs(),
    st.lists(
        st.tuples(st.integers(0, 200), st.integers(1, 200), st.integers(2, 400)), min_size=1, max_size=5
    ),
    st.lists(st.integers(1, 120), min_size=3, max_size=30),
)
def test_solo_runs_on_tight_pools_leave_the_cache_as_step_by_step(configuration, requests, segments):
    preset, model, knobs, sizes = configuration
    make_policy(preset, **knobs)  # a configuration the engine refuses fails here, before the comparison
    fast, slow = (Run(preset, model, knobs, fast=flag, sizes=sizes) for flag in (True, False))
    pending = list(enumerate(requests))
    for position, num_steps in enumerate(segments):
        if pending and (not fast.remaining or position % 2):
            index, (shared_len, own_len, output_len) = pending.pop(0)
            for run in (fast, slow):
                run.start(
                    f"r{index}",
                    _tokens(index, shared_len, own_len, output_len),
                    shared_len + own_len,
                    output_len,
                )
            assert snapshot(fast.manager) == snapshot(slow.manager), f"after admitting r{index}"
        if not fast.remaining:
            continue
        rid = sorted(fast.remaining)[position % len(fast.remaining)]
        for run in (fast, slow):
            run.decode(rid, num_steps)
        assert fast.iteration == slow.iteration and fast.remaining == slow.remaining
        assert snapshot(fast.manager) == snapshot(slow.manager), f"after {num_steps} decode steps of {rid}"
    fast.manager.check_integrity()


def test_a_state_taken_at_a_page_end_reaches_the_tree_in_the_next_step():
    """Marconi's vLLM+ baseline inserts each page's state while taking the next step: a run of solo steps
    must not jump over that insert (it starts no page the tree would not see)."""
    model = hybrid_model(swa=True, mamba=True, window=40)
    knobs = dict(page_size=16, chunked_prefill_size=64, mamba_chunk=16, track_interval=32)
    fast, slow = (Run("marconi-vllm", model, knobs, fast=flag) for flag in (True, False))
    for run in (fast, slow):
        run.start("r0", _tokens(0, 50, 30, 300), 80, 300)
        run.decode("r0", 100)
    assert snapshot(fast.manager) == snapshot(slow.manager)
