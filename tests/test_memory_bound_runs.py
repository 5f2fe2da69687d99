"""A memory-bound run's settled steps as lists (``sim/cost/decode_run_settled.py``'s ``MEMORY_BOUND_RUNS``: the
durations one comprehension, the ends one ``accumulate``, the horizon found by bisection) give the lean loop's
floats bit for bit, and whole timed runs the same tables.

Runs drawn on every model, contexts below, around and past the window, GPUs whose FLOPs are slow enough that
compute bounds some steps or all, horizons anywhere and exactly at a step's end; the fixed cases put floors on
how many runs took the lists, and hold runs whose bound changes between their ends (compute first, memory
last, or the other way) to the loop."""

from __future__ import annotations

import dataclasses
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.cost import CostModel, get_gpu
from sim.cost import decode_run_settled as settled_module
from sim.cost.decode_run import roofline_decode_run
from sim.cost.decode_run_settled import settled_decode_run
from sim.models import get_model
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst
from tests.settled_runs import float_bits, settled_runs

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

_STEPS = settled_module._memory_bound_steps


def _both(cost: CostModel, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int) -> int:
    """The run with the switch on against the lean loop and the reference, bit for bit; 1 where it took the lists."""
    co, gpu = cost._coefficients, cost.gpu
    with mock.patch.object(settled_module, "_memory_bound_steps", side_effect=_STEPS) as lists:
        starts, durations = settled_decode_run(co, gpu, contexts, now, horizon, max_steps)
    with mock.patch.object(settled_module, "MEMORY_BOUND_RUNS", False):
        loop = settled_decode_run(co, gpu, contexts, now, horizon, max_steps)
    reference = roofline_decode_run(co, gpu, contexts, now, horizon, max_steps)
    for other in (loop, reference):
        assert float_bits(starts) == float_bits(other[0]) and float_bits(durations) == float_bits(other[1])
        assert [type(start) for start in starts] == [type(start) for start in other[0]]
    return lists.call_count


def _cost(model: str, gpu_name: str, peak_flops: float | None) -> CostModel:
    gpu = get_gpu(gpu_name)
    return CostModel(
        get_model(model), gpu if peak_flops is None else dataclasses.replace(gpu, peak_flops=peak_flops)
    )


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    settled_runs(now_at_zero=True),
    st.sampled_from(["h200", "h100"]),
    st.sampled_from([None, 1e9, 1e10, 1e11, 1e12, 1e13]),
)
@example(("inkling", (5000, 7000), 0, float("inf"), 300), "h200", None)
def test_memory_bound_runs_are_the_loop_bit_for_bit(run, gpu_name, peak_flops):
    model, contexts, now, horizon, max_steps = run
    _both(_cost(model, gpu_name, peak_flops), contexts, now, horizon, max_steps)


def test_horizons_at_a_steps_end_cut_as_the_loop_does():
    """A horizon exactly at a step's end (or an ulp either side) ends the run before that step."""
    cost = _cost("inkling", "h200", None)
    contexts = (3000, 5000, 9000)
    full = settled_decode_run(cost._coefficients, cost.gpu, contexts, 1.5, float("inf"), 400)
    assert _both(cost, contexts, 1.5, float("inf"), 400) == 1 and len(full[0]) == 400
    for cut in (1, 2, 100, 399):
        end = full[0][cut]
        for horizon in (end, end * (1 + 2**-52), end * (1 - 2**-52)):
            assert _both(cost, contexts, 1.5, horizon, 400) == 1


# (model, peak FLOPs, contexts, steps, whether memory bounds the first and the last step): found by a search
BOUND_CASES = [
    ("gemma-4-26b-a4b", 1.7782794100389227e13, (1034,) * 8, 20000, (True, False)),
    ("gpt-oss-20b", 1.7782794100389227e13, (138,) * 8, 20000, (True, False)),
    ("tiny", 1e13, (74,), 20000, (True, False)),
    ("tiny", 1.7782794100389227e13, (256,) * 4, 2000, (False, True)),
    ("tiny", 3.1622776601683793e13, (74,) * 8, 2000, (False, True)),
    ("gpt-oss-20b", None, (138,) * 8, 2000, (True, True)),
    ("inkling", 1e9, (5000,) * 3, 2000, (False, False)),
]


@pytest.mark.parametrize(("model", "peak_flops", "contexts", "num_steps", "bound"), BOUND_CASES)
def test_runs_whose_bound_changes_between_their_ends_go_through_the_loop(
    model, peak_flops, contexts, num_steps, bound
):
    """FLOPs slow enough that compute bounds one end of the run and memory the other (the bound changes inside
    it): the lists are not taken; where memory bounds both ends they are; every run equals the loop."""
    cost = _cost(model, "h200", peak_flops)
    co, gpu = cost._coefficients, cost.gpu
    flops_rate, bytes_rate = gpu.peak_flops * gpu.mfu, gpu.mem_bandwidth * gpu.bw_efficiency
    first = settled_module.first_step_figures(co, contexts)
    each = (co.full_flops * len(contexts), co.full_bytes * len(contexts))
    last = (first[0] + (num_steps - 1) * each[0], first[1] + (num_steps - 1) * each[1])
    assert tuple(figures[1] / bytes_rate > figures[0] / flops_rate for figures in (first, last)) == bound
    assert _both(cost, contexts, 0.0, float("inf"), num_steps) == all(bound)


@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm", "freetoken", "radix"])
def test_whole_runs_take_memory_bound_lists(policy):
    knobs = dict(page_size=16, track_interval=64)
    for bounds in (False, True):
        config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds)
        # the lists, not ``ARRAY_RUNS``' arrays (held to the lists by tests/test_run_arrays_property.py)
        with (
            mock.patch.object(settled_module, "ARRAY_RUNS", False),
            mock.patch.object(settled_module, "_memory_bound_steps", side_effect=_STEPS) as lists,
        ):
            fast = simulate(Trace(growing_burst(6)), config)
        with mock.patch.object(settled_module, "MEMORY_BOUND_RUNS", False):
            reference = simulate(Trace(growing_burst(6)), config)
        assert fast.steps.equals(reference.steps) and fast.requests.equals(reference.requests)
        assert fast.summary == reference.summary
        assert lists.call_count >= 3
