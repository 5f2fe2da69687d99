"""The settled steps' lean loop (``sim/cost/decode_run_settled.py``) gives the reference's floats bit for bit:
``roofline_decode_run`` (``sim/cost/decode_run.py``) and ``steps_before`` over ``CostModel.decode_times``, on
contexts drawn below, around and past each model's window (so runs settle anywhere, or never within the run),
horizons that cut the run before, at or after it settles, and GPUs slow enough that FLOPs set the step time."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost import CostModel, get_gpu
from sim.cost.decode_run import roofline_decode_run, steps_before
from sim.cost.decode_run_settled import settled_decode_run
from sim.models import get_model
from tests.settled_runs import float_bits, settled_runs


@settings(max_examples=400, deadline=None, derandomize=True)
@given(settled_runs(), st.sampled_from(["h200", "h100"]), st.sampled_from([None, 1e9, 1e10, 1e11, 1e12]))
def test_the_settled_loop_is_the_reference_bit_for_bit(run, gpu_name, peak_flops):
    model, contexts, now, horizon, max_steps = run
    gpu = get_gpu(gpu_name)
    cost = CostModel(
        get_model(model), gpu if peak_flops is None else dataclasses.replace(gpu, peak_flops=peak_flops)
    )
    co, gpu = cost._coefficients, cost.gpu
    starts, durations = settled_decode_run(co, gpu, contexts, now, horizon, max_steps)
    ref_starts, ref_durations = roofline_decode_run(co, gpu, contexts, now, horizon, max_steps)
    assert float_bits(starts) == float_bits(ref_starts) and float_bits(durations) == float_bits(ref_durations)
    each_starts, each = steps_before(cost.decode_times(contexts), now, horizon, max_steps)
    assert float_bits(starts) == float_bits(each_starts) and float_bits(durations) == float_bits(each)


def test_a_run_that_settles_midway_goes_on_from_the_references_clock():
    cost = CostModel(get_model("inkling"), get_gpu("h200"))
    co, gpu = cost._coefficients, cost.gpu
    contexts = (3, 200, 505, 4000)  # settles 509 steps in
    full = settled_decode_run(co, gpu, contexts, 1.5, float("inf"), 800)
    assert full == roofline_decode_run(co, gpu, contexts, 1.5, float("inf"), 800) and len(full[0]) == 800
    for cut in (100, 508, 509, 510, 700):  # the horizon at a step's start: the step before it is the last
        horizon = full[0][cut]
        assert settled_decode_run(co, gpu, contexts, 1.5, horizon, 800) == (
            full[0][: cut - 1],
            full[1][: cut - 1],
        )
