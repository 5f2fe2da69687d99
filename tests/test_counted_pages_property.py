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
3. Marconi's tuner caches (anonymous pools, ``test_anonymous_pages.cache_pair``) running generated requests
   alone with the switch on and off: every request's outcome, the tree's nodes with their page lists (as lists),
   pool and eviction counts equal after every request. This one patches no class, so it runs against the
   compiled core too (``HYBRIDCACHE_COMPILED``, in ``.ci/run``'s hot tests), where the lists are counted as well.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from anonymous_runs import run_switched
from cache_helpers import hybrid_model
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_anonymous_pages import cache_pair, decisions, request_lists, run_request, tight_marconi_caches
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases

import sim.cache.request as request_module
from sim.cache.counted_pages import CountedPages
from sim.cache.pools import ANONYMOUS_ID
from sim.cache.sizing import PoolSizes

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


def tuner_cache_run(configuration, requests, counted: bool) -> tuple[list, list]:
    """The requests run alone on a tuner's anonymous cache with the switch set: the log of each one's outcome
    and the cache after it (page lists as lists), and the ``CountedPages`` its tree holds at the end."""
    model, knobs, sizes = configuration
    _, cache = cache_pair(model, knobs, sizes)
    log: list = []
    for index, request in enumerate(requests):
        with pytest.MonkeyPatch.context() as monkeypatch:  # a module global: compiled code reads it too
            monkeypatch.setattr(request_module, "COUNTED_PAGES", counted)
            log.append(run_request(cache, index, request, knobs["chunked_prefill_size"]))
        lists = [
            (list(n.full_pages), None if n.swa_pages is None else list(n.swa_pages))
            for n in cache.tree.nodes()
        ]
        log.append((decisions(cache), lists))
    pages = [
        p for n in cache.tree.nodes() for p in (n.full_pages, n.swa_pages) if isinstance(p, CountedPages)
    ]
    return log, pages


TUNER_REQUESTS = [(i % 2, 60, 30 + 7 * i, 20 + i) for i in range(12)]  # test_anonymous_pages' window


@settings(max_examples=150, deadline=None)
@given(tight_marconi_caches(), request_lists(8))
def test_a_tuner_cache_decides_alike_counted_or_not(configuration, requests):
    on, off = tuner_cache_run(configuration, requests, True), tuner_cache_run(configuration, requests, False)
    assert on[0] == off[0] and not off[1]


def test_a_tuner_cache_holds_counted_lists():
    """The property above is not met by a run that never counts: a page-1 window, compiled or not, ends with
    counted lists of more than one length in its tree."""
    configuration = (
        hybrid_model(window=40),
        {"page_size": 1, "chunked_prefill_size": 64},
        PoolSizes(300, 300, 6),
    )
    on, off = (
        tuner_cache_run(configuration, TUNER_REQUESTS, True),
        tuner_cache_run(configuration, TUNER_REQUESTS, False),
    )
    assert on[0] == off[0] and not off[1]
    assert len(on[1]) >= 5 and len({len(pages) for pages in on[1]}) >= 2
