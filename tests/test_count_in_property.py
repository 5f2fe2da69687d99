"""Anonymous ids added to a request's counted page lists as counts (``counted_pages.count_in``, switch
``COUNT_IN``) against the lists of ids the reference adds, which ``CountedPages.__iadd__`` reads back.

1. Generated lists (counted or real, empty or not, SWA entries None or live) and adds (ids, SWA ids or None):
   where ``count_in`` moves the counts, the lists equal what ``+=`` of the reference's lists leaves, entry by
   entry; where it declines, nothing moved.
2. Generated Marconi and SGLang+ runs (``test_marconi_anonymous_ids.marconi_cases``: pages 1, 2 and 16, replay
   and timed, pools apart or one byte budget, bounds on and off) with the switch on and off: every allocation,
   every tree's nodes with their page lists (as lists) as each tree is thrown away, and the tables equal.
3. Fixed timed runs at page 1 hold a floor on the adds counted (a run that never counted would pass 2).
"""

from __future__ import annotations

import pytest
from anonymous_runs import run_switched
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways, same_run_counting
from test_marconi_anonymous_ids import FIXED_CASES, marconi_cases

import sim.cache.request as request_module
from sim.cache import counted_pages
from sim.cache.counted_pages import CountedPages, count_in
from sim.cache.pools import ANONYMOUS_ID
from sim.run.simulate import SimConfig
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

SWITCH = (counted_pages, "COUNT_IN")


def _lists(kind: str, length: int, num_none: int):
    """A request's page list as a run may hold it: counted, or the real list it stands for."""
    if kind == "counted":
        return CountedPages(length, num_none)
    return [None] * num_none + [ANONYMOUS_ID] * (length - num_none)


def _reference_add(full, swa, num_pages: int, has_swa: bool):
    """``RequestCache.add_own_pages`` of fresh lists: ``+=`` onto lists that hold pages, else the new lists."""
    new_full, new_swa = [ANONYMOUS_ID] * num_pages, [ANONYMOUS_ID if has_swa else None] * num_pages
    if not full:
        return new_full, new_swa
    full += new_full
    swa += new_swa
    return full, swa


@settings(max_examples=400, deadline=None)
@given(
    kinds=st.tuples(st.sampled_from(["counted", "list"]), st.sampled_from(["counted", "list"])),
    length=st.integers(0, 9),
    swa_none=st.integers(0, 9),
    num_pages=st.integers(0, 9),
    has_swa=st.booleans(),
)
@example(kinds=("counted", "counted"), length=4, swa_none=4, num_pages=3, has_swa=False)
@example(kinds=("counted", "counted"), length=4, swa_none=1, num_pages=3, has_swa=True)
@example(kinds=("counted", "counted"), length=0, swa_none=0, num_pages=2, has_swa=False)
def test_counts_moved_equal_the_lists_added(kinds, length, swa_none, num_pages, has_swa):
    swa_none = min(swa_none, length)
    if not has_swa:
        swa_none = length  # without SWA a request's SWA entries are all None
    full, swa = _lists(kinds[0], length, 0), _lists(kinds[1], length, swa_none)
    before = (list(full), list(swa))
    ref_full, ref_swa = _reference_add(
        _lists(kinds[0], length, 0), _lists(kinds[1], length, swa_none), num_pages, has_swa
    )
    if count_in(full, swa, num_pages, has_swa):
        assert isinstance(full, CountedPages) and isinstance(swa, CountedPages)
        assert list(full) == list(ref_full) and list(swa) == list(ref_swa)
        assert full == CountedPages(len(ref_full), 0) and swa == CountedPages(
            len(ref_swa), list(ref_swa).count(None)
        )
    else:
        assert (list(full), list(swa)) == before
        assert kinds != ("counted", "counted") or not length  # it declines only lists, or empty ones


def test_a_none_after_live_swa_entries_is_left_to_the_reference():
    """SWA Nones added after live entries: ``__iadd__``'s assertion, not a count, answers them."""
    full, swa = CountedPages(3), CountedPages(3, 1)
    assert not count_in(full, swa, 2, has_swa=False)
    assert (full, swa) == (CountedPages(3), CountedPages(3, 1))


def _counted_run_equal(trace, config, monkeypatch) -> None:
    same_both_ways(lambda counted: run_switched(trace, config, {SWITCH: counted}, monkeypatch))


@pytest.mark.interpreted  # sets the module's switch and patches the pools
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=FIXED_CASES[3][:2])
@example(case=FIXED_CASES[4][:2])
def test_marconis_runs_are_the_same_with_counts_moved(case, monkeypatch):
    trace, config = case
    _counted_run_equal(trace, config, monkeypatch)  # a configuration the engine refuses: rejected


def _counted_adds(trace: Trace, config: SimConfig) -> int:
    """The run with the switch on, asserted the same run as with it off; how many adds it counted."""
    counted = lambda _, moved: moved  # noqa: E731
    return same_run_counting(trace, config, request_module, "count_in", counted, counted_pages, "COUNT_IN")


@pytest.mark.interpreted  # counts through a patch the compiled core would not see
@pytest.mark.parametrize("policy", ["marconi-sglang", "marconi"])
def test_a_page_one_burst_counts_its_batch_steps_pages(policy):
    """A growing burst at page 1, timed: its event steps' page-only pages and its lockstep runs are counted in
    (one add a request a step or run), bounds on and off."""
    for bounds in (False, True):
        config = SimConfig(policy=policy, model="inkling", mode="timed", bounds=bounds)
        assert _counted_adds(Trace(growing_burst(6)), config) >= 30
