"""``no-cache``'s lean passes against the reference: under hybrid SWA the pass's ``req_states`` and charged requests
are not gathered (``nocache.SWA_SKIPS_STATES``: SGLang skips their check there), and a batch run's pass is begun with
its steps in flight alone (``sglang_runs.NULL_DECODE_PASS``: the null rules' budget is read only after the next full
step's own pass). Off, both are the reference.

Each case runs with both switches on and with both off and logs every admission check (the request, its length,
the verdict and the pass's accounts it read), every launched step (its items, the steps in flight the rules hold,
the pass's accounts, ``batch_is_full``) and every run's first event step (its batch, the steps in flight after it):
the logs must be equal entry by entry, and the tables and summaries equal. Generated bursts on models with SWA
and without, pages 1, 2 and 16, tight and roomy pools (refusals), the overlap loop on and off, bounds on and off;
fixed bursts put floors on the checks made and the runs' passes taken lean."""

from __future__ import annotations

from typing import Any, Callable
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sglang_event_steps import assert_logged_runs_equal

from conformance.compare_steps import simulated_steps
from sim.cache.engines import nocache
from sim.cache.engines.nocache import NoCacheRules
from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_runs
from sim.sched.sglang import SGLangScheduler
from sim.trace import Trace
from tests.conformance.test_sglang_no_cache import DECODE_SHAPES
from tests.conformance.test_sglang_no_cache import _decode_shape as decode_shape
from tests.fast_slow_helpers import growing_burst, nocache_burst, null_bursts, null_config

# the calls go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

_ADMISSION_REFUSAL = NoCacheRules.admission_refusal
_LAUNCH = SGLangScheduler._launch
_EVENT_STEP = sglang_runs._event_step


@st.composite
def drawn_knob_bursts(draw):
    """``nocache_burst``'s (four models, running rows, SWA frees and chunks at drawn sizes), overlap and bounds drawn."""
    trace, model, knobs, pool_tokens = nocache_burst(draw, [1, 2, 16])
    knobs["overlap"] = draw(st.booleans())
    config = SimConfig(
        policy="no-cache", model=model, knobs=knobs, pool_tokens=pool_tokens, bounds=draw(st.booleans())
    )
    return trace, config


def _logged_run(run: Callable[[], Any], switch: bool) -> tuple:
    """``run()`` with both switches as given; its result, the log, and how many admission checks and runs' first
    event steps it made, and how many of the checks found ``req_states`` gathered."""
    log: list = []
    counts = {"checks": 0, "gathered": 0, "passes": 0}

    def admission_refusal(rules, manager, req):
        refusal = _ADMISSION_REFUSAL(rules, manager, req)
        counts["checks"] += 1
        counts["gathered"] += rules.req_states is not None
        log.append(("check", req.request_id, req.kv_len, str(refusal), tuple(rules.pass_budget)))
        return refusal

    def launch(sched, iteration):
        batch = _LAUNCH(sched, iteration)
        rules = sched.rules
        items = tuple((item.plan, item.is_prefill) for item in batch.items)
        log.append(("launch", iteration, items, tuple(sorted(rules.in_flight)), tuple(rules.pass_budget)))
        log.append(("full", sched.batch_is_full, rules.full_pool_tokens))
        return batch

    def event_step(sched, reqs, iteration, in_flight, *args, **kwargs):
        batch = _EVENT_STEP(sched, reqs, iteration, in_flight, *args, **kwargs)
        counts["passes"] += in_flight is not None
        read = None if batch is None else tuple((item.plan, item.is_prefill) for item in batch.items)
        log.append(("event", iteration, read, tuple(sorted(sched.rules.in_flight))))
        return batch

    with (
        mock.patch.object(nocache, "SWA_SKIPS_STATES", switch),
        mock.patch.object(sglang_runs, "NULL_DECODE_PASS", switch),
        mock.patch.object(NoCacheRules, "admission_refusal", admission_refusal),
        mock.patch.object(SGLangScheduler, "_launch", launch),
        mock.patch.object(sglang_runs, "_event_step", event_step),
    ):
        result = run()
    return result, log, counts


def lean_passes(trace: Trace, config: SimConfig) -> dict:
    """Both runs, asserted equal entry by entry and table by table; the switch-on run's counts."""
    fast, fast_log, counts = _logged_run(lambda: simulate(trace, config), True)
    reference, reference_log, _ = _logged_run(lambda: simulate(trace, config), False)
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return counts


@pytest.mark.parametrize("name", list(DECODE_SHAPES))
def test_the_decode_owed_shapes_check_as_the_reference(name):
    """The shapes where the decode still owed refuses (no SWA: the states gathered), as the harness runs them."""
    fast, fast_log, counts = _logged_run(lambda: simulated_steps(decode_shape(name), "no-cache"), True)
    reference, reference_log, _ = _logged_run(lambda: simulated_steps(decode_shape(name), "no-cache"), False)
    assert fast == reference and fast_log == reference_log
    assert counts["gathered"] >= 2


@settings(max_examples=40, deadline=None, derandomize=True)
@given(null_bursts())
@example((Trace(growing_burst(6)), null_config("inkling", 1, 3000, True, True)))
@example((Trace(growing_burst(6)), null_config("qwen3-next", 16, 3000, False, False)))
def test_lean_passes_admit_and_decode_as_the_reference(case):
    lean_passes(*case)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(drawn_knob_bursts())
def test_lean_passes_at_drawn_knobs(case):
    lean_passes(*case)


# floors: each fixed burst's switch-on run made at least this many admission checks, of which this many gathered
# ``req_states`` (under SWA: none, exactly), and began this many runs' passes (the counts seen)
FLOORS = [
    ("inkling", 1, 3000, True, 3667, 0, 3),
    ("inkling", 2, 12000, True, 640, 0, 10),
    ("inkling", 16, 0, False, 6, 0, 9),
    ("gemma-4-26b-a4b", 16, 0, True, 6, 0, 6),
    ("qwen3-next", 16, 3000, True, 15, 11, 0),
    ("qwen3-next", 2, 3000, False, 15, 11, 0),
]


@pytest.mark.parametrize("model,page,pool_tokens,overlap,checks,gathered,passes", FLOORS)
def test_fixed_bursts_check_and_pass_lean(model, page, pool_tokens, overlap, checks, gathered, passes):
    config = null_config(model, page, pool_tokens, overlap, False)
    counts = lean_passes(Trace(growing_burst(6)), config)
    assert counts["checks"] >= checks and counts["passes"] >= passes
    assert counts["gathered"] >= gathered
    if model != "qwen3-next":  # hybrid SWA: nothing gathered
        assert counts["gathered"] == 0
