"""A lockstep stretch on anonymous pools taken at once (``sim/cache/plain_decodes.py``'s ``LOCKSTEP_RUN_AT_ONCE``:
``take_lockstep_run`` counts the ids out and answers one run) leaves every table as the reference, which lists
every id, slices it per request and merges a pair per step back into the run (``page_step_runs``).

Generated bursts on every loop that takes quiet stretches (SGLang's ``marconi-sglang``, ``marconi``, ``radix`` and
``sglang``; the default loop's ``no-cache`` and ``marconi-vllm``; FreeToken's) at pages 1, 2 and 16, bounds on and
off, tight and roomy pools; the fixed bursts put a floor on the runs the switch-on run took at once, counted in
its own run."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from same_runs import same_run_counting

from sim.cache import plain_decodes
from sim.cache.plain_decodes import PlainDecodes
from sim.run.simulate import SimConfig
from sim.sched import batch as batch_module
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests, growing_burst

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

POLICIES = ["marconi-sglang", "marconi", "radix", "sglang", "no-cache", "marconi-vllm", "freetoken"]


def _config(policy: str, page: int, pool_tokens: int, bounds: bool) -> SimConfig:
    knobs: dict = dict(page_size=page, track_interval=max(page, 16) * 4)
    pools = (
        dict(pool_tokens=pool_tokens, mamba_states=400 if policy == "marconi-vllm" else 48)
        if pool_tokens
        else {}
    )
    return SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds, **pools)


def runs_at_once(trace: Trace, config: SimConfig, starts_once: bool = True) -> int:
    """The run with the switch on, asserted equal to the run with it off; returns how many stretches the
    switch-on run took at once. ``starts_once`` False: the takes get no page starts (``PAGE_STARTS_ONCE``), so
    every stretch asks whether it is in lockstep."""
    if not starts_once:
        with mock.patch.object(batch_module, "PAGE_STARTS_ONCE", False):
            return runs_at_once(trace, config)
    taken = lambda _, pages: pages is not None  # noqa: E731
    return same_run_counting(
        trace, config, PlainDecodes, "take_lockstep_run", taken, plain_decodes, "LOCKSTEP_RUN_AT_ONCE"
    )


@st.composite
def bursts(draw):
    requests = burst_requests(draw, draw(st.integers(2, 10)), 2000, 700, 400)
    policy, page = draw(st.sampled_from(POLICIES)), draw(st.sampled_from([1, 1, 2, 16]))
    pool_tokens = draw(st.sampled_from([0, 3000, 12000]))
    config = _config(policy, page, pool_tokens, draw(st.booleans()))
    return Trace(sorted(requests, key=lambda r: r.arrival)), config


@settings(max_examples=30, deadline=None, derandomize=True)
@given(bursts())
def test_runs_taken_at_once_change_no_table(case):
    runs_at_once(*case)


@pytest.mark.parametrize("policy", ["marconi-sglang", "marconi", "freetoken"])
def test_a_growing_burst_takes_its_lockstep_runs_at_once(policy):
    """Anonymous pools (Marconi's, FreeToken's) at page 1: requests decoding together start a page each at
    every step; and at page 2, with the takes given no starts, none is in lockstep."""
    for bounds in (False, True):
        assert runs_at_once(Trace(growing_burst(6)), _config(policy, 1, 0, bounds)) >= 3
        assert runs_at_once(Trace(growing_burst(6)), _config(policy, 1, 0, bounds), starts_once=False) >= 3
    assert runs_at_once(Trace(growing_burst(6)), _config(policy, 2, 0, False), starts_once=False) == 0


@pytest.mark.parametrize("policy", ["radix", "sglang"])
def test_pools_with_ids_take_the_reference(policy):
    """Pools that hand out real ids (SGLang's) never take the run at once, at page 1 or 16."""
    for page in (1, 16):
        assert runs_at_once(Trace(growing_burst(6)), _config(policy, page, 0, False)) == 0
