"""A carried batch run's page starts carried too (``sim/sched/sglang_carried_starts.py``, switch
``CARRY_PAGE_STARTS``): each running request's next page start read once as the run's step it falls at and moved
only where the request gets a page, a stretch's pages handed out per request started, against the reference (off:
``stretch_within``'s ``page_starts`` read off the lengths at every stretch, ``take_batch_decodes``' hand-out, the
event step's pages read off the lengths), with the silent steps carried in both runs.

Each case runs both ways and logs every batch run (its steps, its full steps' shape and batch) and every event step
(each request's lengths, frontier, checkpoints, own FULL and SWA pages; every pool; the tree's counts): the logs
must be equal entry by entry, and the two runs' tables and summaries equal. The switch-on run also checks every
carried page start it uses against the one read afresh off the request's lengths, and every stretch's starts
against ``page_starts``, so a stale one fails before any output could show it. ``sglang_carried``'s generated
sessions (pages 1, 2, 16 and 64, the presets of SGLang's loop, both triggers, overlap on and off, tight and roomy
pools, bounds on and off), fixed bursts and the real trace's head, with floors on each use of the carried starts.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from sglang_event_steps import logged_on_against_off, sglang_config, simulate_patched
from test_sglang_carried_property import HEAD, cases, logging_patches

from sim.cache import plain_decodes
from sim.run.simulate import SimConfig
from sim.sched import sglang_carried, sglang_carried_starts
from sim.trace import Trace
from sim.trace.azure_import import import_mooncake
from tests.fast_slow_helpers import growing_burst

# the calls go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

Dues = sglang_carried_starts.PageDues
_DUES, _STRETCH, _STARTS, _NEEDED = Dues.dues_at, Dues.stretch, Dues.starts_within, Dues.pages_needed
_STEPPED, _HAND_OUT = Dues.stepped, sglang_carried_starts.hand_out_each
COUNTED = ("carried", "stretched", "handed", "lockstep", "needed", "stepped")


def _checked_patches(counts: dict) -> list:
    """``PageDues`` wrapped: every page start used checked against the lengths' own, each use counted."""

    def dues_at(self, at):
        counts["carried"] += self.dues is not None
        dues = _DUES(self, at)
        assert dues == [at + sglang_carried_starts.next_start(req, self.page) for req in self.reqs]
        return dues

    def stretch(self, manager, iteration, done, steps, announced):
        lockstep = self.page == 1 and all(due == iteration + done for due in _DUES(self, iteration + done))
        taken = _STRETCH(self, manager, iteration, done, steps, announced)
        counts["stretched"] += bool(taken[0])
        counts["lockstep"] += bool(taken[0]) and lockstep
        return taken

    def starts_within(self, at, steps):
        starts = _STARTS(self, at, steps)
        assert starts == _MANAGERS[-1].page_starts(self.reqs, steps)
        return starts

    def needed(self, at):
        counts["needed"] += 1
        pages = _NEEDED(self, at)
        assert pages == [req.pages_needed(req.kv_len + 1) for req in self.reqs]
        return pages

    def stepped(self, needs, at, *args):
        counts["stepped"] += self.dues is not None
        _STEPPED(self, needs, at, *args)

    def hand_out(manager, reqs, starts):
        counts["handed"] += 1
        _HAND_OUT(manager, reqs, starts)

    named = (("dues_at", dues_at), ("stretch", stretch), ("starts_within", starts_within))
    named += (("pages_needed", needed), ("stepped", stepped))
    return [mock.patch.object(Dues, name, new) for name, new in named] + [
        mock.patch.object(sglang_carried_starts, "hand_out_each", hand_out)
    ]


_MANAGERS: list = []  # the running batch run's manager, for the starts read afresh


def _logged_run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with ``CARRY_PAGE_STARTS`` as given (the silent steps carried); its result, log and uses."""
    log: list = []
    counts = dict.fromkeys(COUNTED, 0)

    patches: list = [
        mock.patch.object(sglang_carried, "CARRY_SILENT_STEPS", True),
        mock.patch.object(plain_decodes, "STARTS_COUNTED_IN_ORDER", True),
        mock.patch.object(sglang_carried_starts, "CARRY_PAGE_STARTS", switch),
    ]
    patches += logging_patches(log, lambda sched: _MANAGERS.append(sched.manager)) + _checked_patches(counts)
    try:
        result = simulate_patched(trace, config, patches)
    finally:
        _MANAGERS.clear()
    return result, log, counts


def carried_starts_against_read(trace: Trace, config: SimConfig) -> dict:
    """Both runs, asserted equal run by run, step by step and table by table; returns the switch-on run's uses."""
    return logged_on_against_off(_logged_run, trace, config)


TOTALS = dict.fromkeys(("runs",) + COUNTED, 0)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cases())
@example((Trace(growing_burst(6)), sglang_config("sglang", 64, 12000, True)))
@example((Trace(growing_burst(6)), sglang_config("sglang", 1, 12000, False)))
def test_carried_page_starts_move_what_the_read_ones_move(case):
    counts = carried_starts_against_read(*case)
    TOTALS["runs"] += 1
    for name in COUNTED:
        TOTALS[name] += counts[name]


def test_the_generated_runs_carry_their_page_starts():
    """The property above is exercised: its runs carried page starts into stretches and event steps."""
    if not TOTALS["runs"]:
        test_carried_page_starts_move_what_the_read_ones_move()
    assert TOTALS["carried"] > 2000 and TOTALS["stretched"] > 500 and TOTALS["handed"] > 200, TOTALS
    assert TOTALS["needed"] > 500 and TOTALS["stepped"] > 500 and TOTALS["lockstep"] > 5, TOTALS


# the real head's floors: page starts carried, stretches taken, hand-outs, event steps' pages read off them and
# event steps moving them (the counts seen)
HEAD_FLOORS = [("sglang", (303, 111, 78, 120, 120)), ("sglang-retain", (268, 101, 74, 110, 110))]


@pytest.mark.parametrize("policy,floor", HEAD_FLOORS)
def test_the_real_head_carries_its_page_starts(policy, floor):
    trace = import_mooncake(str(HEAD), chains=True)
    for bounds in (False, True):
        counts = carried_starts_against_read(trace, SimConfig(policy=policy, bounds=bounds))
        taken = tuple(counts[name] for name in ("carried", "stretched", "handed", "needed", "stepped"))
        assert all(count >= least for count, least in zip(taken, floor, strict=True)), taken


# floors: each fixed burst's switch-on run (carried, stretched, handed, lockstep, needed, stepped), the counts seen
# (radix: no event steps, its starts carried across its stretches)
FLOORS = [
    ("sglang", 64, 12000, (61, 21, 7, 0, 29, 27)),
    ("sglang", 1, 0, (97, 38, 0, 38, 59, 59)),
    ("sglang-retain", 2, 12000, (81, 26, 26, 0, 37, 34)),
    ("radix", 16, 0, (12, 6, 6, 0, 0, 0)),
]


@pytest.mark.parametrize("policy,page,pool_tokens,floor", FLOORS)
def test_fixed_bursts_carry_their_page_starts(policy, page, pool_tokens, floor):
    for bounds in (False, True):
        counts = carried_starts_against_read(
            Trace(growing_burst(6)), sglang_config(policy, page, pool_tokens, bounds)
        )
        taken = tuple(counts[name] for name in COUNTED)
        assert all(count >= least for count, least in zip(taken, floor, strict=True)), taken
