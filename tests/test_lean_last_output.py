"""The last-output step of the default loop's batch runs (``loop_runs.take_last_output_step``) lean (switch
``loop_runs.LEAN_LAST_OUTPUT``): it begins no pass and, where its batch is not read, a quiet request only moves its
length; with it on, every table and summary is as with a pass begun and each request planned in full (off).
``test_last_output_steps.py``'s generated bursts (``no-cache`` and ``marconi-vllm`` at pages 1/2/16/64, the presets'
pools and tight ones, bounds on and off) and its growing burst. Each run counts the passes begun and the decode
steps planned: the switch-on run must begin fewer passes where a run took a last output, and, bounds off, plan
fewer decodes, so the property is not met by a switch that does nothing."""

from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

import pytest
from hypothesis import given, settings

from sim.cache.manager import CacheManager
from sim.run.simulate import SimConfig, simulate
from sim.sched import loop_runs
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst
from tests.same_runs import same_both_ways
from tests.test_last_output_steps import bursts

_BEGIN_PASS = CacheManager.begin_pass
_PREPARE_DECODE = CacheManager.prepare_decode

# the runs count through patches of CacheManager.begin_pass and prepare_decode, which the compiled core binds
pytestmark = pytest.mark.interpreted


def lean_both_ways(trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool) -> tuple[int, int]:
    """The run with the switch on and off held the same; how many fewer passes the switch-on run began and how
    many fewer decode steps it planned (each at least 0)."""
    pools: dict = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}  # 0: the preset's own
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds, **pools)

    def run(on: bool) -> tuple:
        counts = {"passes": 0, "decodes": 0}

        def begin_pass(manager: CacheManager, *args):
            counts["passes"] += 1
            return _BEGIN_PASS(manager, *args)

        def prepare_decode(manager: CacheManager, *args):
            counts["decodes"] += 1
            return _PREPARE_DECODE(manager, *args)

        with ExitStack() as patches:
            patches.enter_context(mock.patch.object(loop_runs, "LEAN_LAST_OUTPUT", on))
            for name, counting in (("begin_pass", begin_pass), ("prepare_decode", prepare_decode)):
                patches.enter_context(
                    mock.patch.object(CacheManager, name, autospec=True, side_effect=counting)
                )
            return (), simulate(trace, config), counts

    on, off = same_both_ways(run)
    fewer = (off[2]["passes"] - on[2]["passes"], off[2]["decodes"] - on[2]["decodes"])
    assert min(fewer) >= 0
    return fewer


@settings(max_examples=20, deadline=None, derandomize=True)
@given(bursts())
def test_a_lean_last_output_step_changes_nothing(case):
    lean_both_ways(*case)


@pytest.mark.parametrize("page", [1, 2, 16, 64])
@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm"])
@pytest.mark.parametrize("bounds", [False, True])
def test_a_growing_burst_takes_lean_last_outputs(policy: str, page: int, bounds: bool):
    """Requests of different lengths decoding together, most ending in a batch run's last step: fewer passes begun
    with the switch on, and, where nobody reads the batches (bounds off) and pages outlast two steps, fewer decodes
    planned (at page 1 every step starts a page; ``marconi-vllm`` at page 2 takes a checkpoint every other step)."""
    knobs = dict(page_size=page, track_interval=page if policy == "marconi-vllm" else 64 * max(1, page // 16))
    passes, decodes = lean_both_ways(Trace(growing_burst(6)), policy, knobs, 0, bounds)
    assert passes >= 3
    assert decodes > 0 or bounds or page <= 2


def test_tight_pools_with_retractions():
    """``test_last_output_steps.py``'s no-cache burst on pools that stall chunks and retract requests."""
    knobs = dict(page_size=16, track_interval=64, chunked_prefill_size=512, max_running_requests=8)
    passes, decodes = lean_both_ways(Trace(growing_burst(10)), "no-cache", knobs, 9000, False)
    assert passes >= 1 and decodes >= 1


@pytest.mark.parametrize("trigger", ["tokens", "iterations"])
@pytest.mark.parametrize("interval", [3, 7, 32])
def test_swa_frees_at_the_last_output(trigger: str, interval: int):
    """The growing burst on ``no-cache`` with SWA frees every few steps or tokens: a request freeing at its last
    output's step is not quiet there (the free must be taken, at that step's iteration)."""
    knobs = dict(page_size=16, track_interval=64, swa_free_trigger=trigger, swa_eviction_interval=interval)
    passes, decodes = lean_both_ways(Trace(growing_burst(8)), "no-cache", knobs, 0, False)
    assert passes >= 3 and decodes > 0
