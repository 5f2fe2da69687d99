"""An SGLang batch run's quiet-stretch asks known empty from one request (``sim/sched/sglang_asks.py``,
``EMPTY_KNOWN``) against the reference (off: every ask made of the whole batch).

Each case runs with the switch on and off and logs every quiet stretch a run took (its iteration, its length,
its full steps) and, after every event step, its requests (lengths, decode steps, frontier, planned and taken
checkpoints, spare states, own FULL and SWA pages) and every pool (free count, high water, the freed ids in the
order it hands them out next): the two logs must be equal entry by entry, and the two runs' tables and summaries
equal. An ask answered empty without asking that was not empty would drop a stretch from the log (its steps then
taken as event steps or not at all); a stretch taken longer or shorter than the batch's own answer changes its
entry. Generated bursts on the presets of SGLang's loop at pages 1, 2 and 16, tight and roomy pools, bounds on
and off, and long sessions under both SWA triggers; fixed bursts put floors on the asks the switch-on run knew
empty."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from sglang_event_steps import assert_logged_runs_equal, pool_state, sglang_bursts, sglang_config

from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_asks, sglang_runs
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the calls go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

_ASK, _EVENT_STEP, _KNOWN = sglang_runs.ask_quiet_stretch, sglang_runs._event_step, sglang_asks.known_empty
GENERATED = {"runs": 0, "known": 0}


def _request_state(req) -> tuple:
    lengths = (req.request_id, req.kv_len, req.decode_steps, req.swa_frontier)
    return lengths + (
        req.planned,
        req.checkpoint,
        tuple(req.spare_states),
        tuple(req.own_full),
        tuple(req.own_swa),
    )


def _logged_run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with ``EMPTY_KNOWN`` as given; returns its result, the log, and the asks it knew empty."""
    log: list = []
    counts = {"known": 0}

    def ask(manager, reqs, iteration, done, max_steps, announced, limiter):
        taken = _ASK(manager, reqs, iteration, done, max_steps, announced, limiter)
        if taken[0]:
            steps = tuple((step.offset, step.pages, step.num_steps) for step in taken[1])
            log.append(("stretch", iteration + done, taken[0], steps))
        return taken

    def event_step(sched, reqs, iteration, in_flight, announced, process, needs=None):
        batch = _EVENT_STEP(sched, reqs, iteration, in_flight, announced, process, needs)
        pools = tuple(pool_state(pool) for pool in sched.manager.pools.values())
        log.append(("step", iteration, tuple(_request_state(req) for req in reqs), pools))
        return batch

    def known(manager, req, iteration):
        answer = _KNOWN(manager, req, iteration)
        counts["known"] += answer
        return answer

    patches = [
        mock.patch.object(sglang_asks, "EMPTY_KNOWN", switch),
        mock.patch.object(sglang_runs, "ask_quiet_stretch", side_effect=ask),
        mock.patch.object(sglang_runs, "_event_step", side_effect=event_step),
        mock.patch.object(sglang_asks, "known_empty", side_effect=known),
    ]
    for patch in patches:
        patch.start()
    try:
        result = simulate(trace, config)
    finally:
        for patch in reversed(patches):
            patch.stop()
    return result, log, counts


def both_ways(trace: Trace, config: SimConfig) -> int:
    """Both runs, asserted equal ask by ask, step by step and table by table; returns the asks known empty."""
    fast, fast_log, fast_counts = _logged_run(trace, config, True)
    reference, reference_log, reference_counts = _logged_run(trace, config, False)
    assert not reference_counts["known"]
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return fast_counts["known"]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(sglang_bursts())
@example((Trace(growing_burst(6)), sglang_config("marconi-sglang", 1, 0, False)))
@example((Trace(growing_burst(6)), sglang_config("sglang", 1, 0, True)))
@example((Trace(growing_burst(6)), sglang_config("sglang-retain", 2, 3000, True)))
def test_known_empty_asks_move_what_the_reference_moves(case):
    GENERATED["runs"] += 1
    GENERATED["known"] += both_ways(*case)


def test_the_generated_runs_know_empty_asks():
    """The property above is exercised: its runs knew asks empty without asking the batch."""
    if not GENERATED["runs"]:
        test_known_empty_asks_move_what_the_reference_moves()
    assert GENERATED["known"] > 100, GENERATED


def _session_config(policy: str, page: int, trigger: str, interval: int, overlap: bool) -> SimConfig:
    knobs = dict(
        page_size=page,
        overlap=overlap,
        chunked_prefill_size=max(page, 16) * 64,
        track_interval=max(page, 16) * 4,
        swa_free_trigger=trigger,
        swa_eviction_interval=interval,
    )
    return SimConfig(policy=policy, model="inkling", knobs=knobs, pool_tokens=14000, mamba_states=48)


# each fixed burst's switch-on run knew at least this many asks empty (the counts seen)
FLOORS = [
    ("sglang", 1, "tokens", 32, True, 92),
    ("sglang", 16, "iterations", 7, True, 170),
    ("sglang-retain", 2, "tokens", 7, False, 86),
    ("sglang-retain-tree", 16, "tokens", 128, True, 73),
    ("sglang", 2, "tokens", 300, False, 41),
    ("marconi-sglang", 1, "tokens", 32, True, 6),
]


@pytest.mark.parametrize("policy,page,trigger,interval,overlap,floor", FLOORS)
def test_fixed_bursts_know_empty_asks(policy, page, trigger, interval, overlap, floor):
    known = both_ways(Trace(growing_burst(6)), _session_config(policy, page, trigger, interval, overlap))
    assert known >= floor, known
