"""A run of decode steps' times in one loop (``sim/cost/decode_run.py``) are the reference's floats, bit for bit:
``steps_before`` over ``CostModel.decode_times``, and ``step_time`` of each step's own shape; contexts drawn
around each model's window (where a step's SWA keys stop growing), horizons that cut the run anywhere; and a
step's FLOPs and bytes (decodes summed at once) are the roofline's run by run."""

from __future__ import annotations

import dataclasses
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost import CostModel, StepShape, get_gpu, step_bytes, step_flops
from sim.cost.decode_run import steps_before
from sim.models import FULL, SWA, get_model
from sim.run.backend import FixedStepBackend, PredictBackend

MODELS = ["inkling", "gemma-4-26b-a4b", "qwen3-next", "gpt-oss-20b", "tiny"]


def _bits(values: list[float]) -> list[bytes]:
    return [struct.pack("<d", value) for value in values]


@st.composite
def decode_runs(draw):
    model = get_model(draw(st.sampled_from(MODELS)))
    near = max(model.window, 1)
    context = st.one_of(st.integers(0, 3 * near), st.integers(near - 40, near + 40).filter(lambda c: c >= 0))
    contexts = tuple(draw(st.lists(context, min_size=1, max_size=12)))
    now = draw(st.floats(0, 1e4, allow_nan=False))
    horizon = now + draw(st.floats(0, 2.0, allow_nan=False))
    return model, contexts, now, horizon, draw(st.integers(0, 300))


# a decode step is memory-bound on a real GPU: slower compute makes its FLOPs the step's time too
PEAK_FLOPS = st.sampled_from([None, 1e9, 1e10, 1e11, 1e12])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(decode_runs(), st.sampled_from(["h200", "h100"]), PEAK_FLOPS)
def test_a_decode_run_is_the_reference_bit_for_bit(run, gpu_name, peak_flops):
    model, contexts, now, horizon, max_steps = run
    gpu = get_gpu(gpu_name)
    cost = CostModel(model, gpu if peak_flops is None else dataclasses.replace(gpu, peak_flops=peak_flops))
    starts, durations = cost.decode_run(contexts, now, horizon, max_steps)
    ref_starts, ref_durations = steps_before(cost.decode_times(contexts), now, horizon, max_steps)
    assert _bits(starts) == _bits(ref_starts) and _bits(durations) == _bits(ref_durations)
    each = [
        cost.step_time(StepShape.trusted((), tuple(c + k for c in contexts))) for k in range(len(durations))
    ]
    assert _bits(durations) == _bits(each)
    assert PredictBackend(cost).decode_run(contexts, now, horizon, max_steps) == (starts, durations)


def test_a_long_run_crosses_the_window_and_stops_at_the_horizon():
    cost = CostModel(get_model("inkling"), get_gpu("h200"))
    contexts = (3, 200, 505, 511, 512, 4000)
    starts, durations = cost.decode_run(contexts, 1.5, 1e9, 700)
    assert len(durations) == 700
    assert (starts, durations) == steps_before(cost.decode_times(contexts), 1.5, 1e9, 700)
    cut = starts[400]
    assert cost.decode_run(contexts, 1.5, cut, 700) == (starts[:399], durations[:399])


def test_the_fixed_step_backend_runs_the_reference_rule():
    backend = FixedStepBackend(0.25, per_token_s=0.01)
    assert backend.decode_run((5, 9), 1.0, 2.0, 10) == ([1.0, 1.27, 1.54], [0.27, 0.27, 0.27])


def _reference_flops_and_bytes(model, shape: StepShape) -> tuple[int, int]:
    """A step's FLOPs and bytes run by run, as the roofline counts them (attended keys per token run)."""
    flops = shape.num_tokens * (2 * model.active_param_count() + model.state_flops_per_token())
    flops += model.attention_flops_per_attended_token(FULL) * shape.attended_context()
    if model.has_swa:
        flops += model.attention_flops_per_attended_token(SWA) * shape.attended_context(model.window)
    bytes_read = model.weight_bytes_read(shape.num_tokens)
    for start, count in shape.token_runs():
        bytes_read += (start + count) * model.full_kv_bytes_per_token()
        bytes_read += (min(start, model.window) + count) * model.swa_kv_bytes_per_token()
        bytes_read += 2 * model.mamba_state_bytes()
    return flops, bytes_read


@st.composite
def step_shapes(draw):
    near = draw(st.sampled_from([64, 128, 512, 1024]))
    position = st.one_of(st.integers(0, 4 * near), st.integers(max(near - 3, 0), near + 3))
    prefill = tuple(draw(st.lists(st.tuples(position, st.integers(1, 3 * near)), max_size=3)))
    decode = tuple(draw(st.lists(position, min_size=0 if prefill else 1, max_size=20)))
    return StepShape(prefill, decode)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(MODELS), step_shapes(), PEAK_FLOPS)
def test_a_steps_time_is_the_roofline_of_its_runs(name, shape, peak_flops):
    model, gpu = get_model(name), get_gpu("h200")
    cost = CostModel(model, gpu if peak_flops is None else dataclasses.replace(gpu, peak_flops=peak_flops))
    assert (step_flops(model, shape), step_bytes(model, shape)) == _reference_flops_and_bytes(model, shape)
    assert _bits([cost.step_time(shape)]) == _bits([cost.roofline(shape).total_s])
