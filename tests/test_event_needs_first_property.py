"""An SGLang batch run's step after a quiet stretch that stopped short of the run's end: its needs read first and,
where some request's step is an event, the stretch's question not asked again (``sglang_runs.EVENT_NEEDS_FIRST``,
``_event_known``), against the reference (switch off: the stretch asked first, answering 0, then the step's fit and
needs read).

Each case runs with the switch on and off and logs every quiet stretch taken (its iteration, the steps it took and
the full steps among them) and, after every event step, what it moved (``event_step_snapshot``: its requests, the
pools, the tree, the steps in flight, the batch read): the two logs must be equal entry by entry (the reference's
empty stretches, which move nothing, are not logged), and the two runs' tables and summaries equal. The switch-off
run asks at least as many stretches that take nothing; fixed bursts put floors on how many fewer the switch-on run
asked, each counted in its own pair of runs. Generated bursts on the presets of SGLang's loop at pages 1, 2 and 16, tight and roomy pools, bounds on and off.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from sglang_event_steps import assert_logged_runs_equal, event_step_snapshot, sglang_bursts, sglang_config

from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_runs
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the calls go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

_EVENT_STEP, _STRETCH = sglang_runs._event_step, sglang_runs.take_quiet_stretch


def _logged_run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with the switch as given; returns its result, the log, and the stretches asked that took nothing."""
    log: list = []
    empty = [0]

    def stretch(manager, reqs, iteration, done, max_steps, announced):
        taken, full_steps = _STRETCH(manager, reqs, iteration, done, max_steps, announced)
        empty[0] += not taken
        if taken:
            log.append(
                ("stretch", iteration + done, taken, tuple(full[:2] + full[3:] for full in full_steps))
            )
        return taken, full_steps

    def event_step(sched, reqs, iteration, in_flight, announced, process, needs=None):
        batch = _EVENT_STEP(sched, reqs, iteration, in_flight, announced, process, needs)
        log.append(("step", iteration, event_step_snapshot(sched, reqs, batch)))
        return batch

    patches = [
        mock.patch.object(sglang_runs, "EVENT_NEEDS_FIRST", switch),
        mock.patch.object(sglang_runs, "take_quiet_stretch", side_effect=stretch),
        mock.patch.object(sglang_runs, "_event_step", side_effect=event_step),
    ]
    for patch in patches:
        patch.start()
    try:
        result = simulate(trace, config)
    finally:
        for patch in reversed(patches):
            patch.stop()
    return result, log, empty[0]


def needs_first(trace: Trace, config: SimConfig) -> int:
    """Both runs, asserted equal step by step and table by table; returns how many fewer empty stretches the
    switch-on run asked."""
    fast, fast_log, fast_empty = _logged_run(trace, config, True)
    reference, reference_log, reference_empty = _logged_run(trace, config, False)
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    assert fast_empty <= reference_empty
    return reference_empty - fast_empty


def by_iterations(config: SimConfig) -> SimConfig:
    """The config with SGLang's SWA free triggered by iterations: ``plain_decode_steps`` reads the iteration."""
    config.knobs["swa_free_trigger"] = "iterations"
    return config


@settings(max_examples=40, deadline=None, derandomize=True)
@given(sglang_bursts())
@example((Trace(growing_burst(6)), sglang_config("marconi-sglang", 1, 0, False)))
@example((Trace(growing_burst(6)), sglang_config("marconi-sglang", 2, 3000, True)))
@example((Trace(growing_burst(6)), sglang_config("sglang", 1, 0, True)))
@example((Trace(growing_burst(6)), sglang_config("sglang-retain", 2, 12000, False)))
@example((Trace(growing_burst(6)), by_iterations(sglang_config("sglang", 1, 0, False))))
def test_needs_first_moves_what_the_reference_moves(case):
    needs_first(*case)


# floors: each fixed burst's switch-on run asked at least this many fewer empty stretches (each the count seen)
FLOORS = [
    ("marconi-sglang", 1, 0, False, 6),
    ("marconi-sglang", 2, 0, False, 6),
    ("marconi", 1, 0, False, 6),
    ("sglang", 1, 0, False, 28),
    ("sglang", 1, 0, True, 31),
    ("sglang-retain", 2, 12000, False, 14),
    ("sglang-retain-tree", 16, 12000, False, 16),
]


@pytest.mark.parametrize("policy,page,pool_tokens,iterations,floor", FLOORS)
def test_fixed_bursts_skip_stretches(policy, page, pool_tokens, iterations, floor):
    for bounds in (False, True):
        config = sglang_config(policy, page, pool_tokens, bounds)
        skipped = needs_first(Trace(growing_burst(6)), by_iterations(config) if iterations else config)
        assert skipped >= floor, skipped
