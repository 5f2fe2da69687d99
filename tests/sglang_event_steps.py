"""What the switch-on / switch-off tests of SGLang's event steps share (``test_page_only_decode_property``,
``test_event_step_one_pass_property``, ``test_sglang_carried_property``,
``test_sglang_carried_starts_property``): the presets and their configs, generated bursts, a pool's state, a run
under patches, and the comparison of two logged runs."""

from __future__ import annotations

from contextlib import ExitStack

from hypothesis import strategies as st
from same_runs import assert_same_run

from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests

POLICIES = ["radix", "sglang", "sglang-retain", "sglang-retain-tree", "marconi-sglang", "marconi"]


def sglang_config(policy: str, page: int, pool_tokens: int, bounds: bool) -> SimConfig:
    knobs: dict = dict(page_size=page, track_interval=max(page, 16) * 4)
    pools = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}
    model = "qwen3-next" if policy == "radix" else "inkling"
    return SimConfig(policy=policy, model=model, knobs=knobs, bounds=bounds, **pools)


def pool_state(pool) -> tuple:
    """A pool's free ids in the order it will hand them out (``returned_ids``), not the lists ``Pool._take``
    keeps them in: those depend on how a run of takes is split (a run's one take of 14 ids against the full
    steps' 12 + 1 + 1 copies another list's rest), while every later ``alloc`` reads only the order."""
    return (pool.num_free, pool.high_water, pool._num_returned, tuple(pool.returned_ids()))


@st.composite
def sglang_bursts(draw):
    """A burst of 2 to 10 requests on one of SGLang's loop presets, pages 1, 2 or 16, tight or roomy pools."""
    requests = burst_requests(draw, draw(st.integers(2, 10)), 2000, 700, 400)
    policy, page = draw(st.sampled_from(POLICIES)), draw(st.sampled_from([1, 2, 16]))
    pool_tokens = draw(st.sampled_from([0, 3000, 12000]))
    config = sglang_config(policy, page, pool_tokens, draw(st.booleans()))
    return Trace(sorted(requests, key=lambda r: r.arrival)), config


def assert_logged_runs_equal(fast: tuple, reference: tuple) -> None:
    """Two ``(result, log)`` runs: the logs equal entry by entry, the tables and summaries equal."""
    (fast_result, fast_log), (reference_result, reference_log) = fast, reference
    assert len(fast_log) == len(reference_log)
    for fast_entry, reference_entry in zip(fast_log, reference_log, strict=True):
        assert fast_entry == reference_entry
    assert_same_run(fast_result, reference_result)


def simulate_patched(trace: Trace, config: SimConfig, patches: list) -> object:
    """``simulate`` with the patches in place, each stopped again in reverse order however the run ends."""
    with ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        return simulate(trace, config)


def logged_on_against_off(logged_run, trace: Trace, config: SimConfig) -> dict:
    """A logged run with the switch on and one with it off (``logged_run(trace, config, on)`` gives the result, its
    log and the fast path's counts), asserted equal run by run and table by table, the reference's counts all zero;
    returns the switch-on run's counts."""
    fast, fast_log, fast_counts = logged_run(trace, config, True)
    reference, reference_log, reference_counts = logged_run(trace, config, False)
    assert not any(reference_counts.values())
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return fast_counts
