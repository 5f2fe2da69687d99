"""``vllm``'s timed batch runs (``sim/sched/vllm_runs.py``, switch ``BATCH_RUNS``; the block manager's
``take_decode_batch``): every running request's steady decode steps, block boundaries included, taken in one
event are the same run as the loop's full steps (the reference, switch off): request and step tables and
summaries equal, over generated fan-out and multi-turn traces, models with SWA, Mamba or both, page sizes,
async scheduling on and off, and pools small enough that requests are preempted. The same over runs through a last
output (switch ``THROUGH_LAST_OUTPUT``, the batch runs on both ways), fan-out requests' output lengths spread so
that one finishes while others go on. The fixed examples hold floors: batch runs that free, allocate and hash
blocks, a run stopped before a step the pool cannot back, runs ended at a last output, preemptions."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.blocks import decode_batch
from sim.run.simulate import SimConfig, simulate
from sim.sched import vllm, vllm_runs
from sim.trace.generate import fanout, multiturn
from sim.trace.trace import Trace

REACHED: Counter = Counter()  # what the batch runs took, over the fixed examples
RUN_DRAWS = dict(  # the generated runs, shared with test_vllm_batch_runs_bounds.py
    model=st.sampled_from(["tiny", "tiny-swa", "qwen3-next", "inkling", "gpt-oss-20b"]),
    shape=st.sampled_from(["fanout", "multiturn"]),
    size=st.integers(2, 7),
    output_len=st.integers(3, 120),
    spread=st.integers(0, 40),  # fan-out output lengths output_len + 0..spread
    page=st.sampled_from([16, 32]),
    async_on=st.booleans(),
    pool_tokens=st.integers(500, 4000),
)


def counting(monkeypatch) -> None:
    """Count the batch runs, their event steps, those stopped short and those ended at a last output."""
    take, take_run = decode_batch.take_decode_batch, vllm_runs.take_batch_run

    def counted_run(manager, runs, iteration, num_steps):
        taken, full_steps = take_run(manager, runs, iteration, num_steps)
        REACHED["last outputs"] += bool(full_steps and full_steps[-1].finished)
        return taken, full_steps

    def counted(manager, reqs, iteration, num_steps):
        taken, steps = take(manager, reqs, iteration, num_steps)
        REACHED["runs"] += taken > 0
        REACHED["event steps"] += len(steps)
        REACHED["stopped short"] += 0 < taken < num_steps
        return taken, steps

    monkeypatch.setattr(vllm_runs, "take_decode_batch", counted)
    monkeypatch.setattr(vllm, "take_batch_run", counted_run)


def trace_of(shape: str, size: int, output_len: int, spread: int = 0):
    """A fan-out trace (output lengths ``output_len + 0..spread``) or a multi-turn one (each ``output_len``: the
    turns quote the outputs)."""
    if shape == "multiturn":
        return multiturn(size, 3, 100, 24, output_len, think_time=0.05)
    trace = fanout(2, size, 120, 24, output_len, request_rate=40.0)
    requests = [
        replace(r, output_len=output_len + i * 7 % (spread + 1)) for i, r in enumerate(trace.requests)
    ]
    return Trace(requests, path="<fanout>")


def config_of(model: str, knobs: dict, pool_tokens: int, bounds: bool) -> SimConfig:
    pool_tokens *= 10 if model == "qwen3-next" else 1  # its Mamba block is ~1,000 tokens: vLLM needs more
    return SimConfig(
        policy="vllm", model=model, mode="timed", bounds=bounds, pool_tokens=pool_tokens, knobs=knobs
    )


def both_ways(
    model: str, shape: str, size: int, output_len: int, knobs: dict, pool_tokens: int, monkeypatch, **more
):
    """The run with ``vllm_runs``' switch (``more["switch"]``, else ``BATCH_RUNS``) on and off, the same run."""
    trace = trace_of(shape, size, output_len, more.get("spread", 0))
    config = config_of(model, knobs, pool_tokens, bounds=False)

    def run(on: bool) -> tuple:
        monkeypatch.setattr(vllm_runs, more.get("switch", "BATCH_RUNS"), on)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    return on[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    model="tiny", shape="fanout", size=6, output_len=90, spread=0, page=16, async_on=True, pool_tokens=900
)  # preempts
@given(**RUN_DRAWS)
def test_batch_runs_are_the_same_run_as_full_steps(
    model, shape, size, output_len, spread, page, async_on, pool_tokens, monkeypatch
):
    knobs = {"page_size": page, "async_scheduling": async_on}
    both_ways(model, shape, size, output_len, knobs, pool_tokens, monkeypatch, spread=spread)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    model="tiny", shape="fanout", size=6, output_len=60, spread=30, page=16, async_on=False, pool_tokens=900
)
@given(**RUN_DRAWS)
def test_runs_through_a_last_output_are_the_same_run_as_stopping_short(
    model, shape, size, output_len, spread, page, async_on, pool_tokens, monkeypatch
):
    knobs = {"page_size": page, "async_scheduling": async_on}
    both_ways(
        model,
        shape,
        size,
        output_len,
        knobs,
        pool_tokens,
        monkeypatch,
        spread=spread,
        switch="THROUGH_LAST_OUTPUT",
    )


FIXED = (  # (model, shape, size, output_len, async, pool tokens, spread)
    ("tiny", "fanout", 6, 90, True, 900, 0),
    ("tiny-swa", "multiturn", 5, 100, False, 1200, 0),
    ("qwen3-next", "fanout", 5, 80, True, 1200, 20),
    ("gpt-oss-20b", "fanout", 6, 90, False, 900, 30),
    ("inkling", "fanout", 6, 90, True, 1500, 0),
)


@pytest.mark.interpreted  # counts through a patched function, which compiled callers never reach
def test_fixed_runs_reach_the_batch_runs_floors(monkeypatch):
    counting(monkeypatch)
    assert_floors(REACHED, both_ways, monkeypatch)


def assert_floors(reached: Counter, both_ways, monkeypatch) -> None:
    """``both_ways`` over every fixed run in one test (so in one process, whatever runs the tests): batch runs taken
    with event steps, a run stopped short, runs ended at a last output, requests preempted."""
    reached.clear()
    for model, shape, size, output_len, async_on, pool_tokens, spread in FIXED:
        knobs = {"page_size": 16, "async_scheduling": async_on}
        result = both_ways(model, shape, size, output_len, knobs, pool_tokens, monkeypatch, spread=spread)
        reached["preempted"] += int(result.requests["retractions"].sum())
    assert reached["runs"] > 0 and reached["event steps"] > 0, reached
    assert reached["stopped short"] > 0 and reached["preempted"] > 0, reached
    assert reached["last outputs"] > 0, reached
