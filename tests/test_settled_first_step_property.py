"""The first settled step's figures from the contexts' sum (``decode_run_settled.FIRST_STEP_SUMS``) are the
reference's (``_first_step`` request by request, ``sim/cost/decode_run.py``): the same integers for every model and
contexts at or past its window (a run settled from its start or ``settled`` steps in), and so the same decode runs,
floats bit for bit, lists or arrays, on against off; whole timed runs give the same tables and summary."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run

from sim.cost import CostModel, get_gpu
from sim.cost import decode_run_settled as settled_module
from sim.cost.decode_run_settled import settled_decode_run
from sim.models import get_model
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst
from tests.settled_runs import MODELS, float_bits, settled_runs


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.sampled_from(MODELS), st.lists(st.integers(0, 1 << 40), min_size=1, max_size=12), st.integers(0, 5000)
)
def test_the_sums_are_the_references_integers(model_name, contexts, settled):
    co = CostModel(get_model(model_name), get_gpu("h200"))._coefficients
    past = tuple(c + max(co.window - c, 0) for c in contexts)  # every context at or past the window
    later = tuple(c + settled for c in past)
    expected = settled_module.first_step_figures(co, later)
    assert settled_module._settled_first_step(co, past, settled) == expected
    assert settled_module._int_figures(co)


def _bits(times) -> list[bytes]:
    return float_bits(times.tolist() if isinstance(times, np.ndarray) else list(times))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(settled_runs(), st.sampled_from(["h200", "h100"]), st.booleans())
def test_the_runs_are_the_references_bit_for_bit(run, gpu_name, as_arrays):
    model, contexts, now, horizon, max_steps = run
    cost = CostModel(get_model(model), get_gpu(gpu_name))
    co, gpu = cost._coefficients, cost.gpu
    lean = settled_decode_run(co, gpu, contexts, now, horizon, max_steps, as_arrays)
    with mock.patch.object(settled_module, "FIRST_STEP_SUMS", False):
        reference = settled_decode_run(co, gpu, contexts, now, horizon, max_steps, as_arrays)
    assert type(lean[0]) is type(reference[0])
    assert _bits(lean[0]) == _bits(reference[0]) and _bits(lean[1]) == _bits(reference[1])


@pytest.mark.parametrize("policy", ["radix", "sglang", "no-cache", "vllm"])
@pytest.mark.parametrize("model", ["inkling", "qwen3-next"])
def test_whole_runs_make_the_same_tables(policy, model):
    config = SimConfig(policy=policy, model=model, knobs=dict(page_size=16), bounds=False)
    trace = Trace(growing_burst(6))
    lean = simulate(trace, config)
    with mock.patch.object(settled_module, "FIRST_STEP_SUMS", False):
        reference = simulate(trace, config)
    assert_same_run(lean, reference)
    assert len(lean.steps) > 50
