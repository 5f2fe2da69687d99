"""``vllm``'s timed batch runs (``sim/sched/vllm_runs.py``, switch ``BATCH_RUNS``; the block manager's
``take_decode_batch``): every running request's steady decode steps, block boundaries included, taken in one
event are the same run as the loop's full steps (the reference, switch off): request and step tables and
summaries equal, over generated fan-out and multi-turn traces, models with SWA, Mamba or both, page sizes,
async scheduling on and off, and pools small enough that requests are preempted. The fixed examples hold floors:
batch runs that free, allocate and hash blocks, a run stopped before a step the pool cannot back, preemptions."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.blocks import decode_batch
from sim.run.simulate import SimConfig, simulate
from sim.sched import vllm_runs
from sim.trace.generate import fanout, multiturn

REACHED: Counter = Counter()  # what the batch runs took, over the fixed examples
RUN_DRAWS = dict(  # the generated runs, shared with test_vllm_batch_runs_bounds.py
    model=st.sampled_from(["tiny", "tiny-swa", "qwen3-next", "inkling", "gpt-oss-20b"]),
    shape=st.sampled_from(["fanout", "multiturn"]),
    size=st.integers(2, 7),
    output_len=st.integers(3, 120),
    page=st.sampled_from([16, 32]),
    async_on=st.booleans(),
    pool_tokens=st.integers(500, 4000),
)


def counting(monkeypatch, reached: Counter) -> None:
    """Count into ``reached`` the batch runs, their event steps and those stopped short, as they are taken (the
    reference, either switch off, takes none); shared with test_vllm_batch_runs_bounds.py."""
    take = decode_batch.take_decode_batch

    def counted(manager, reqs, iteration, num_steps):
        taken, steps = take(manager, reqs, iteration, num_steps)
        reached["runs"] += taken > 0
        reached["event steps"] += len(steps)
        reached["stopped short"] += 0 < taken < num_steps
        return taken, steps

    monkeypatch.setattr(vllm_runs, "take_decode_batch", counted)


def trace_of(shape: str, size: int, output_len: int):
    if shape == "fanout":
        return fanout(2, size, 120, 24, output_len, request_rate=40.0)
    return multiturn(size, 3, 100, 24, output_len, think_time=0.05)


def config_of(model: str, knobs: dict, pool_tokens: int, bounds: bool) -> SimConfig:
    pool_tokens *= 10 if model == "qwen3-next" else 1  # its Mamba block is ~1,000 tokens: vLLM needs more
    return SimConfig(
        policy="vllm", model=model, mode="timed", bounds=bounds, pool_tokens=pool_tokens, knobs=knobs
    )


def both_ways(model: str, shape: str, size: int, output_len: int, knobs: dict, pool_tokens: int, monkeypatch):
    trace, config = trace_of(shape, size, output_len), config_of(model, knobs, pool_tokens, bounds=False)

    def run(on: bool) -> tuple:
        monkeypatch.setattr(vllm_runs, "BATCH_RUNS", on)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    return on[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    model="tiny", shape="fanout", size=6, output_len=90, page=16, async_on=True, pool_tokens=900
)  # preempts
@given(**RUN_DRAWS)
def test_batch_runs_are_the_same_run_as_full_steps(
    model, shape, size, output_len, page, async_on, pool_tokens, monkeypatch
):
    knobs = {"page_size": page, "async_scheduling": async_on}
    both_ways(model, shape, size, output_len, knobs, pool_tokens, monkeypatch)


FIXED = (  # (model, shape, size, output_len, async, pool tokens)
    ("tiny", "fanout", 6, 90, True, 900),
    ("tiny-swa", "multiturn", 5, 100, False, 1200),
    ("qwen3-next", "fanout", 5, 80, True, 1200),
    ("gpt-oss-20b", "fanout", 6, 90, False, 900),
    ("inkling", "fanout", 6, 90, True, 1500),
)


@pytest.mark.interpreted  # counts through a patched function, which compiled callers never reach
def test_fixed_runs_reach_the_batch_runs_floors(monkeypatch):
    counting(monkeypatch, REACHED)
    assert_floors(REACHED, both_ways, monkeypatch)


def assert_floors(reached: Counter, both_ways, monkeypatch) -> None:
    """``both_ways`` over every fixed run in one test (so in one process, whatever runs the tests): batch runs taken
    with event steps, a run stopped short, requests preempted."""
    reached.clear()
    for model, shape, size, output_len, async_on, pool_tokens in FIXED:
        knobs = {"page_size": 16, "async_scheduling": async_on}
        result = both_ways(model, shape, size, output_len, knobs, pool_tokens, monkeypatch)
        reached["preempted"] += int(result.requests["retractions"].sum())
    assert reached["runs"] > 0 and reached["event steps"] > 0, reached
    assert reached["stopped short"] > 0 and reached["preempted"] > 0, reached
