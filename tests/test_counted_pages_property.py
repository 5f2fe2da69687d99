"""``CountedPages`` (a page list of anonymous pools held as its length and its leading None count) against the
list it stands for, and whole runs with ``request.COUNTED_PAGES`` on against off (lists of ``ANONYMOUS_ID`` and
None, the reference).

1. Generated sequences of the operations page lists take (``+=`` of ids or None runs, slices, ``del`` of a
   slice, a None fill of the live entries just past the freed ones, indexing, ``len``, iteration, ``==``)
   applied to a ``CountedPages`` and to a real list: equal after every step.
2. Generated FreeToken runs (``page_cases``: three presets, three models, pages 1, 2, 16 and 64, small pools,
   bounds on and off; replay and timed; their trees own their lists, so they keep lists: held unchanged) and
   Marconi's (``marconi_cases``, whose tuner forks anonymous caches; SGLang's rules' trees count too):
   every allocation (pool, free count before it, count), every tree's nodes with their FULL and SWA page lists
   (as lists) as each tree is thrown away, the pools' free counts, the eviction counts, and the run's tables and
   summary equal with the switch on and off. Fixed cases hold floors on the counted lists' use.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from anonymous_runs import run_switched
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases

import sim.cache.request as request_module
from sim.cache.counted_pages import CountedPages
from sim.cache.pools import ANONYMOUS_ID

SWITCH = (request_module, "COUNTED_PAGES")

ops = st.lists(
    st.one_of(
        st.tuples(st.just("ids"), st.integers(0, 9)),
        st.tuples(st.just("nones"), st.integers(0, 9)),
        st.tuples(st.just("counted"), st.integers(0, 9), st.integers(0, 9)),
        st.tuples(st.just("del"), st.integers(-12, 12), st.one_of(st.none(), st.integers(-12, 12))),
        st.tuples(st.just("fill"), st.integers(0, 9)),
        st.tuples(st.just("slice"), st.one_of(st.none(), st.integers(-12, 12)), st.integers(-12, 12)),
    ),
    max_size=25,
)


def _apply(op: tuple, pages: list, counted: CountedPages) -> CountedPages:
    kind = op[0]
    if kind in ("ids", "nones", "counted"):
        items = [ANONYMOUS_ID if kind == "ids" else None] * op[1]
        more = CountedPages(op[1] + op[2], op[1]) if kind == "counted" else tuple(items)
        more_list = list(more)
        if more_list[:1] == [None] and any(page is not None for page in pages):
            return counted  # a None after a live entry: page lists never hold one
        pages += more_list
        counted += more
    elif kind == "del":
        del pages[op[1] : op[2]]
        del counted[op[1] : op[2]]
    elif kind == "fill":  # the live entries just past the freed ones
        start = next((i for i, page in enumerate(pages) if page is not None), len(pages))
        stop = min(start + op[1], len(pages))
        pages[start:stop] = [None] * (stop - start)
        counted[start:stop] = (None,) * (stop - start)
    else:
        cut = slice(op[1], op[2])
        assert list(counted[cut]) == pages[cut] and isinstance(counted[cut], CountedPages)
    return counted


@settings(max_examples=400, deadline=None)
@given(first=st.integers(0, 9), first_none=st.integers(0, 9), steps=ops)
@example(first=5, first_none=0, steps=[("fill", 2), ("del", 1, 4), ("slice", None, -1)])
@example(first=3, first_none=3, steps=[("nones", 2), ("ids", 4), ("del", 0, 6), ("fill", 9)])
def test_counted_pages_read_as_the_list_they_stand_for(first, first_none, steps):
    pages: list = [None] * first_none + [ANONYMOUS_ID] * first
    counted = CountedPages(first + first_none, first_none)
    for op in steps:
        counted = _apply(op, pages, counted)
        assert len(counted) == len(pages) and bool(counted) == bool(pages)
        assert (
            list(counted) == pages
            and counted == pages
            and counted == CountedPages(len(pages), pages.count(None))
        )
        for index in range(-len(pages), len(pages)):
            assert counted[index] == pages[index]
        assert [0] + counted == [0, *pages] and counted + [0] == [*pages, 0]
    with pytest.raises(IndexError):
        counted[len(pages)]


def assert_counted_run_equal(trace, config, monkeypatch) -> list:
    """The run with the switch on and off equal (``anonymous_runs.run_switched``, page lists logged as lists);
    returns the ``CountedPages`` the counted one's trees held as they were thrown away."""
    held: dict = {True: [], False: []}
    same_both_ways(
        lambda counted: run_switched(trace, config, {SWITCH: counted}, monkeypatch, held=held[counted])
    )
    assert not any(isinstance(pages, CountedPages) for pages in held[False])  # the switch did switch
    return [pages for pages in held[True] if isinstance(pages, CountedPages)]


@pytest.mark.interpreted  # sets the module's switch; the compiled core keeps lists
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
def test_freetokens_runs_are_the_same_with_counted_pages(case, mode, monkeypatch):
    trace, config = case
    assert_counted_run_equal(trace, replace(config, mode=mode), monkeypatch)  # a refused config: rejected


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[0][:2])
@example(case=MARCONI_CASES[3][:2])
def test_marconis_runs_are_the_same_with_counted_pages(case, monkeypatch):
    trace, config = case
    assert_counted_run_equal(trace, config, monkeypatch)  # a configuration the engine refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("case", [c[:2] for c in FIXED_CASES] + [c[:2] for c in MARCONI_CASES])
def test_the_fixed_runs_end_with_counted_pages_in_their_trees(case, monkeypatch):
    """A test of the fixed examples: Marconi's trees end holding counted lists by the dozen, of more than one
    length (a run that never made one would pass anything; the five end with 5 or more); FreeToken's, whose
    trees own their lists, none."""
    trace, config = case
    held = assert_counted_run_equal(trace, replace(config, mode="replay"), monkeypatch)
    if config.policy.startswith("freetoken"):
        assert not held
    else:
        assert len(held) >= 5 and len({len(pages) for pages in held}) >= 2
