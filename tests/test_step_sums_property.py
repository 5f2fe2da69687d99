"""A step's FLOPs and bytes in one pass (``sim/cost/step_sums.py``) are the roofline's (``flops``, ``bytes_read``),
and ``step_time`` with ``ONE_PASS`` on is the reference's float, bit for bit: chunks and decodes drawn around each
model's window (where SWA keys stop growing: below, at and past it), models with and without SWA or MAMBA, and
GPUs slow enough that compute bounds the step; and whole timed runs give the same tables either way."""

from __future__ import annotations

import dataclasses
import struct
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost import CostModel, StepShape, get_gpu
from sim.cost import step_sums as step_sums_module
from sim.cost.step_sums import step_sums
from sim.models import get_model
from sim.models.presets import MODELS
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

PEAK_FLOPS = st.sampled_from([None, 1e9, 1e11, 1e13])


@st.composite
def shapes(draw):
    model = get_model(draw(st.sampled_from(sorted(MODELS))))
    near = max(model.window, 1)
    position = st.one_of(st.integers(0, 3 * near), st.integers(near - 40, near + 40).filter(lambda p: p >= 0))
    prefill = tuple(draw(st.lists(st.tuples(position, st.integers(1, 2 * near + 64)), max_size=5)))
    decode = tuple(draw(st.lists(position, min_size=0 if prefill else 1, max_size=8)))
    return model, StepShape.trusted(prefill, decode)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(shapes(), st.sampled_from(["h200", "h100", "rtx4090"]), PEAK_FLOPS)
def test_one_pass_is_the_roofline(drawn, gpu_name, peak_flops):
    model, shape = drawn
    gpu = get_gpu(gpu_name)
    cost = CostModel(model, gpu if peak_flops is None else dataclasses.replace(gpu, peak_flops=peak_flops))
    co = cost._coefficients
    flops, kv_bytes, num_tokens = step_sums(co, shape.prefill, shape.decode)
    assert flops == co.flops(shape)
    assert kv_bytes + co.weight_bytes(num_tokens) == co.bytes_read(shape)
    assert num_tokens == shape.num_tokens
    with mock.patch.object(step_sums_module, "ONE_PASS", False):
        reference = cost.step_time(shape)
    assert struct.pack("<d", cost.step_time(shape)) == struct.pack("<d", reference)


def test_both_bounds_and_both_sides_of_the_window_are_drawn():
    """A fixed step of each kind the property covers: a chunk and decodes below and past inkling's window, on
    the H200 (memory-bound) and on a GPU with a thousandth of its FLOPs (compute-bound)."""
    model = get_model("inkling")
    shape = StepShape.trusted(((model.window - 10, 4), (5 * model.window, 2)), (3, model.window, 9000))
    for peak_flops in (None, get_gpu("h200").peak_flops / 1000):
        gpu = get_gpu("h200")
        cost = CostModel(
            model, gpu if peak_flops is None else dataclasses.replace(gpu, peak_flops=peak_flops)
        )
        breakdown = cost.roofline(shape)
        assert breakdown.bound == ("memory" if peak_flops is None else "compute")
        assert cost.step_time(shape) == breakdown.total_s


def test_whole_timed_runs_are_equal_either_way():
    requests = [
        Request(
            id=f"r{index}",
            arrival=index * 0.002,
            prompt=[Segment(ref=f"p{index}", len=700 + 90 * index)],
            output_len=30 + index,
        )
        for index in range(6)
    ]
    for policy in ("marconi-vllm", "vllm", "sglang-retain"):
        config = SimConfig(policy=policy, model="inkling", bounds=False)
        ours = simulate(Trace(requests), config)
        with mock.patch.object(step_sums_module, "ONE_PASS", False):
            theirs = simulate(Trace(requests), config)
        assert ours.steps.equals(theirs.steps) and ours.requests.equals(theirs.requests), policy
        assert ours.summary == theirs.summary, policy
