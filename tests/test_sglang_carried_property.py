"""An SGLang batch run's silent steps carried (``sim/sched/sglang_carried.py``, switch ``CARRY_SILENT_STEPS``): each
running request's ``plain_decode_steps`` read once and moved on by the steps taken, against the reference (off:
the rules asked at every quiet stretch, idle fold and event step).

Each case runs both ways and logs every batch run (its steps, its full steps' shape) and every event step (its
requests' lengths, decode steps, frontier, checkpoints, own FULL and SWA pages; every pool; the tree's counts): the
logs must be equal entry by entry, and the two runs' tables and summaries equal. The switch-on run also checks
every carried answer it uses against the rules' answer asked afresh (a stale one fails there, before any output
could show it). Generated bursts and follow-up turns on the presets of SGLang's loop, pages 1, 2, 16 and 64, track
and trigger intervals of several sizes, both triggers, the overlap loop and the plain one, tight and roomy pools,
bounds on and off; the real trace's head; floors put on the answers carried and on each use of them.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sglang_event_steps import logged_on_against_off, pool_state, sglang_config, simulate_patched

from sim.cache import plain_decodes
from sim.run.simulate import SimConfig
from sim.sched import sglang_carried, sglang_fast, sglang_runs
from sim.trace import Request, Segment, Trace
from sim.trace.azure_import import import_mooncake
from tests.fast_slow_helpers import growing_burst

# the calls go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

HEAD = Path(__file__).parent / "data" / "mooncake_conversation_head.jsonl"  # the first 40 Mooncake lines
Carried = sglang_carried.CarriedSilence
_DUES, _STEPPED, _IDLE = Carried.dues_at, Carried.stepped, Carried.idle_steps
_QUIET, _FITS = Carried.quiet_stretch, Carried.fits_and_needs
_TAKE_BATCH_RUN, _EVENT_STEP = sglang_runs.take_batch_run, sglang_runs._event_step


@st.composite
def sessions(draw) -> list[Request]:
    """Requests close together with long outputs, some followed by a turn that extends the prompt."""
    requests: list[Request] = []
    arrival_ms = 0
    for index in range(draw(st.integers(1, 6))):
        arrival_ms += draw(st.integers(0, 60))
        prompt = [Segment(ref=f"s{index}", len=draw(st.integers(1, 2500)))]
        parent: str | None = None
        for turn in range(draw(st.integers(1, 2))):
            request_id = f"s{index}t{turn}"
            requests.append(
                Request(
                    id=request_id,
                    arrival=arrival_ms / 1000 if parent is None else None,
                    after=parent,
                    think_time=0.0,
                    output_len=draw(st.integers(2, 1200)),
                    prompt=list(prompt),
                )
            )
            prompt = prompt + [Segment(ref=f"{request_id}o", len=draw(st.integers(1, 300)))]
            parent = request_id
    return requests


@st.composite
def cases(draw) -> tuple[Trace, SimConfig]:
    policy = draw(st.sampled_from(["sglang", "sglang", "sglang-retain", "sglang-retain-tree", "radix"]))
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs: dict = dict(
        page_size=page,
        chunked_prefill_size=max(page, 16) * draw(st.integers(4, 64)),
        max_running_requests=draw(st.integers(1, 8)),
        overlap=draw(st.sampled_from([True, True, False])),
        iteration_phase=draw(st.sampled_from([0, 0, 5])),
    )
    if policy != "radix":
        knobs.update(track_interval=max(page, 16) * draw(st.integers(1, 16)))
        knobs.update(swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128, 300])))
        knobs.update(swa_free_trigger=draw(st.sampled_from(["tokens", "tokens", "iterations"])))
    pools = dict(pool_tokens=draw(st.sampled_from([5000, 12000, 60000])), mamba_states=48)
    model = "qwen3-next" if policy == "radix" else "inkling"
    config = SimConfig(policy=policy, model=model, knobs=knobs, bounds=draw(st.booleans()), **pools)
    return Trace(draw(sessions())), config


def _request_state(req) -> tuple:
    return (
        req.request_id,
        req.kv_len,
        req.decode_steps,
        req.swa_frontier,
        req.planned,
        req.checkpoint,
        tuple(req.spare_states),
        tuple(req.own_full),
        tuple(req.own_swa),
        req.commit_pending,
    )


def _snapshot(sched, reqs) -> tuple:
    """What an event step can move: its requests, the pools, the tree's counts."""
    manager, tree = sched.manager, sched.manager.tree
    return (
        tuple(_request_state(req) for req in reqs),
        tuple(pool_state(pool) for pool in manager.pools.values()),
        (tree.num_full_pages, tree.num_swa_pages, tree.num_states, dict(tree.num_evictions)),
    )


def _full_step(full) -> tuple:
    items = None if full.batch is None else tuple((item.plan, item.is_prefill) for item in full.batch.items)
    return (full.offset, full.pages, full.num_steps, full.usage is None, items, len(full.finished))


def logging_patches(log: list, on_run=None) -> list:
    """Patches that log every batch run (its steps taken and full steps) and every event step (what it can move)
    on ``log``; ``on_run(sched)`` is told each run first."""

    def batch_run(sched, iteration, *args):
        if on_run is not None:
            on_run(sched)
        done, full_steps = _TAKE_BATCH_RUN(sched, iteration, *args)
        log.append(("run", iteration, done, tuple(map(_full_step, full_steps))))
        return done, full_steps

    def event_step(sched, reqs, iteration, *args):
        batch = _EVENT_STEP(sched, reqs, iteration, *args)
        log.append(("step", iteration, _snapshot(sched, reqs)))
        return batch

    return [
        mock.patch.object(sglang_runs, "take_batch_run", side_effect=batch_run),
        mock.patch.object(sglang_fast, "take_batch_run", side_effect=batch_run),
        mock.patch.object(sglang_runs, "_event_step", side_effect=event_step),
    ]


def _logged_run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with the switch as given; returns its result, the log, and the carried answers' uses."""
    log: list = []
    counts = {"carried": 0, "stretched": 0, "idle": 0, "fits": 0, "stepped": 0}

    def dues_at(self, iteration):
        counts["carried"] += self.dues is not None
        dues = _DUES(self, iteration)
        phase = iteration + self.phase  # every answer used is the rules' at the run's step
        answers = [due - iteration for due in dues] if self.moves else dues
        assert answers == [self.rules.plain_decode_steps(req, phase) for req in self.reqs]
        return dues

    def quiet(self, *args):
        taken = _QUIET(self, *args)
        counts["stretched"] += bool(taken[0])
        return taken

    def idle(self, *args):
        steps = _IDLE(self, *args)
        counts["idle"] += bool(steps)
        return steps

    def fits(self, *args):
        counts["fits"] += 1
        return _FITS(self, *args)

    def stepped(self, needs, processed, iteration):
        counts["stepped"] += not processed and self.dues is not None
        _STEPPED(self, needs, processed, iteration)

    patches: list = (
        [
            mock.patch.object(sglang_carried, "CARRY_SILENT_STEPS", switch),
            mock.patch.object(plain_decodes, "STARTS_COUNTED_IN_ORDER", switch),
        ]
        + logging_patches(log)
        + [
            mock.patch.object(Carried, name, new)
            for name, new in (
                ("dues_at", dues_at),
                ("quiet_stretch", quiet),
                ("idle_steps", idle),
                ("fits_and_needs", fits),
                ("stepped", stepped),
            )
        ]
    )
    return simulate_patched(trace, config, patches), log, counts


def carried_against_asked(trace: Trace, config: SimConfig) -> dict:
    """Both runs, asserted equal run by run, step by step and table by table; returns the switch-on run's uses."""
    return logged_on_against_off(_logged_run, trace, config)


TOTALS = {"runs": 0, "carried": 0, "stretched": 0, "idle": 0, "stepped": 0}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cases())
@example((Trace(growing_burst(6)), sglang_config("sglang", 64, 12000, True)))
@example((Trace(growing_burst(6)), sglang_config("radix", 16, 12000, False)))
def test_carried_answers_move_what_the_asked_ones_move(case):
    counts = carried_against_asked(*case)
    TOTALS["runs"] += 1
    for name in ("carried", "stretched", "idle", "stepped"):
        TOTALS[name] += counts[name]


def test_the_generated_runs_carry_their_answers():
    """The property above is exercised: its runs carried answers into stretches, idle folds and event steps."""
    if not TOTALS["runs"]:
        test_carried_answers_move_what_the_asked_ones_move()
    assert TOTALS["carried"] > 2000 and TOTALS["stretched"] > 500, TOTALS
    assert TOTALS["idle"] > 10 and TOTALS["stepped"] > 500, TOTALS


# the real head's floors: answers carried, stretches, idle folds and event steps taken with them (the counts seen;
# radix's answers are "never", each run's one stretch taking its steps)
HEAD_FLOORS = [
    ("sglang", (433, 111, 3, 120)),
    ("sglang-retain", (407, 101, 13, 110)),
    ("radix", (0, 38, 0, 0)),
]


@pytest.mark.parametrize("policy,floor", HEAD_FLOORS)
def test_the_real_head_carries_its_answers(policy, floor):
    trace = import_mooncake(str(HEAD), chains=True)
    for bounds in (False, True):
        counts = carried_against_asked(trace, SimConfig(policy=policy, bounds=bounds))
        taken = (counts["carried"], counts["stretched"], counts["idle"], counts["stepped"])
        assert all(count >= least for count, least in zip(taken, floor, strict=True)), taken


# floors: each fixed burst's switch-on run carried at least this many answers, into this many stretches, idle folds
# and event steps (the counts seen)
FLOORS = [
    ("sglang", 64, 12000, (94, 21, 1, 27)),
    ("sglang", 1, 0, (204, 38, 1, 59)),
    ("sglang-retain", 2, 12000, (122, 26, 2, 34)),
    ("radix", 16, 0, (0, 6, 0, 0)),
]


@pytest.mark.parametrize("policy,page,pool_tokens,floor", FLOORS)
def test_fixed_bursts_carry_their_answers(policy, page, pool_tokens, floor):
    for bounds in (False, True):
        counts = carried_against_asked(
            Trace(growing_burst(6)), sglang_config(policy, page, pool_tokens, bounds)
        )
        taken = (counts["carried"], counts["stretched"], counts["idle"], counts["stepped"])
        assert all(count >= least for count, least in zip(taken, floor, strict=True)), taken


@st.composite
def sorted_starts(draw) -> list[tuple[int, int]]:
    """A take's page starts: (step offset, index in the batch), sorted, at most one per request and offset."""
    num_reqs = draw(st.integers(1, 8))
    pairs = draw(st.sets(st.tuples(st.integers(0, 300), st.integers(0, num_reqs - 1)), max_size=40))
    return sorted(pairs)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(sorted_starts())
def test_starts_counted_in_order_count_what_the_counter_counts(starts):
    with mock.patch.object(plain_decodes, "STARTS_COUNTED_IN_ORDER", False):
        reference = plain_decodes.counted_starts(starts)
    assert plain_decodes.STARTS_COUNTED_IN_ORDER
    assert plain_decodes.counted_starts(starts) == reference
