"""A long memory-bound decode run's starts and durations as float64 arrays (``sim/cost/decode_run_settled.py``'s
``ARRAY_RUNS``, asked for by the engine where only its step log reads a run: ``backend.run_for_log``) are the
lists' floats bit for bit, and whole timed runs make the same tables with the switch on and off.

Runs drawn on every model, contexts below, around and past the window, horizons anywhere and at a step's end; the
clock's start at 0 (an int, as SimPy's) or later; whole runs of every loop kind, with and without bounds (the
bounds' recorder, a batch reader, lets a run take arrays: ``backend.ARRAYS_FOR_BATCH_READERS``; off, it keeps the
lists), the arrays' path counted so a floor holds it taken; a listener that may read the clock's floats keeps the
lists."""

from __future__ import annotations

from array import array
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.cache.events import EventBus, PlainStepsEnded, StepEnded, StepStarted
from sim.cost import CostModel, get_gpu
from sim.cost import decode_run_settled as settled_module
from sim.cost.decode_run_settled import settled_decode_run
from sim.models import get_model
from sim.run import backend, step_log
from sim.run.event_delays import event_delays
from sim.run.simulate import SimConfig
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst
from tests.same_runs import same_run_counting
from tests.settled_runs import float_bits, settled_runs

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted


def _as_list(values) -> list[float]:
    return values if isinstance(values, list) else values.tolist()


def _arrays_and_lists(cost: CostModel, contexts: tuple[int, ...], now, horizon, max_steps: int) -> bool:
    """The run asked for as arrays with the switch on against off (lists, the reference), bit for bit and as
    Python floats once listed; True where the arrays were made."""
    co, gpu = cost._coefficients, cost.gpu
    arrays = settled_decode_run(co, gpu, contexts, now, horizon, max_steps, as_arrays=True)
    with mock.patch.object(settled_module, "ARRAY_RUNS", False):
        lists = settled_decode_run(co, gpu, contexts, now, horizon, max_steps, as_arrays=True)
    assert isinstance(lists[0], list) and isinstance(lists[1], list)
    for made, reference in zip(arrays, lists, strict=True):
        assert float_bits(_as_list(made)) == float_bits(reference)
    return isinstance(arrays[0], np.ndarray)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(settled_runs(now_at_zero=True), st.sampled_from(["h200", "h100"]))
@example(("inkling", (5000, 7000), 0, float("inf"), 300), "h200")
@example(("tiny", (3,), 0.25, float("inf"), 900), "h100")
def test_arrays_are_the_lists_bit_for_bit(run, gpu_name):
    model, contexts, now, horizon, max_steps = run
    _arrays_and_lists(CostModel(get_model(model), get_gpu(gpu_name)), contexts, now, horizon, max_steps)


def test_horizons_at_a_steps_end_cut_as_the_lists_do():
    """A horizon exactly at a step's end (or an ulp either side) ends the run before that step; each run of
    these takes the arrays, and a short one (under ``ARRAY_MIN_STEPS``) the lists."""
    cost = CostModel(get_model("inkling"), get_gpu("h200"))
    contexts = (3000, 5000, 9000)
    full = settled_decode_run(cost._coefficients, cost.gpu, contexts, 1.5, float("inf"), 400)
    assert _arrays_and_lists(cost, contexts, 1.5, float("inf"), 400)
    for cut in (1, 2, 100, 399):
        end = full[0][cut]
        for horizon in (end, end * (1 + 2**-52), end * (1 - 2**-52)):
            assert _arrays_and_lists(cost, contexts, 1.5, horizon, 400)
    assert not _arrays_and_lists(cost, contexts, 1.5, float("inf"), settled_module.ARRAY_MIN_STEPS - 1)


def test_event_delays_and_the_log_read_an_array_as_its_list():
    cost = CostModel(get_model("inkling"), get_gpu("h200"))
    co, gpu = cost._coefficients, cost.gpu
    for now in (0, 0.1, 12345.678):
        starts, durations = settled_decode_run(co, gpu, (9000,), now, float("inf"), 300, as_arrays=True)
        assert isinstance(durations, np.ndarray)
        listed = durations.tolist()
        assert event_delays(now, durations, float(starts[-1])) == event_delays(
            now, listed, starts.tolist()[-1]
        )
        assert event_delays(now, durations[:1]) == event_delays(now, listed[:1])
        assert event_delays(now, durations, None) == event_delays(now, listed, None)
        assert all(type(delay) is float for delay in event_delays(now, durations, None))
        for column in (array("d"), []):
            reference = array("d") if isinstance(column, array) else []
            step_log._extend_times(column, starts)
            step_log._extend_times(reference, starts.tolist())
            assert column == reference and all(type(value) is float for value in column)


def _arrays_made(args, result) -> bool:
    return isinstance(result[0], np.ndarray)


@pytest.mark.parametrize(
    "policy", ["no-cache", "radix", "marconi-sglang", "sglang", "freetoken", "marconi-vllm"]
)
@pytest.mark.parametrize("bounds, for_readers", [(False, True), (True, True), (True, False)])
def test_whole_runs_are_the_same_with_arrays(policy, bounds, for_readers):
    """The run with ``ARRAY_RUNS`` on equals the run with it off; the arrays were made (and the log's times were
    doubles, then lists: ``TIMES_AS_DOUBLES`` both ways), with bounds too where the recorder's batch reads let
    them (``ARRAYS_FOR_BATCH_READERS``); without that, the bounds' runs keep the lists."""
    knobs = dict(page_size=16, track_interval=64)
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds)
    trace = Trace(growing_burst(6))
    for doubles in (True, False):
        with (
            mock.patch.object(step_log, "TIMES_AS_DOUBLES", doubles),
            mock.patch.object(backend, "ARRAYS_FOR_BATCH_READERS", for_readers),
        ):
            made = same_run_counting(
                trace,
                config,
                settled_module,
                "_memory_bound_arrays",
                _arrays_made,
                settled_module,
                "ARRAY_RUNS",
            )
        assert made >= 3 if for_readers else made == 0


def test_floats_read_by_any_listener_but_a_batch_reader():
    """``step_floats_read``: no listener, or batch readers alone, read no float; a ``StepEnded`` or
    ``PlainStepsEnded`` handler, or a ``StepStarted`` handler of another kind, may; switch off, any does."""
    bus = EventBus()
    ended, plain = bus.channel(StepEnded), bus.channel(PlainStepsEnded)
    assert not backend.step_floats_read(bus, ended, plain)
    bus.subscribe_batch_reader(lambda event: None)
    assert not backend.step_floats_read(bus, ended, plain)
    with mock.patch.object(backend, "ARRAYS_FOR_BATCH_READERS", False):
        assert backend.step_floats_read(bus, ended, plain)
    assert backend.step_floats_read(bus, [print], plain) and backend.step_floats_read(bus, ended, [print])
    bus.subscribe(StepStarted, lambda event: None)
    assert backend.step_floats_read(bus, ended, plain)
