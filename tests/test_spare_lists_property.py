"""``repeats.SpareIds`` (switch ``SPARE_LISTS``) against the reference, fresh lists: an evicted FreeToken leaf's
FULL page list (every id ``ANONYMOUS_ID``, held by no one else) is kept and handed to a later request's first
pages, cut or grown to length, instead of a list made with ``[ANONYMOUS_ID] * count`` while the dead one is
released. ``SpareIds`` itself: a list taken holds ``count`` ``ANONYMOUS_ID`` and is no list still kept; offers past
the limits, or with the switch off, are refused. As a property over the generated FreeToken runs
(``test_freetoken_page_lists.page_cases``: three presets, three models, pages 1, 2, 16 and 64, small pools,
bounds on and off; replay and timed) and Marconi's (``test_marconi_anonymous_ids.marconi_cases``: its trees do
not own their lists, so none is offered) on anonymous pools: every allocation, every tree's nodes with their
page lists, the pools' counts as the run ends, and the tables and summary equal with the switch on and off; no
two nodes hold one list. Fixed replays hold floors on the spares' use, counted in the test's own run.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from same_runs import assert_same_run
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases
from test_repeats_property import run_logged

import sim.cache.engines.freetoken_tree as freetoken_tree
import sim.cache.repeats as repeats
import sim.cache.request as request_module
from sim.cache.pools import ANONYMOUS_ID
from sim.cache.tree import RadixTree

DISMANTLE = RadixTree.dismantle
OPS = st.lists(st.tuples(st.booleans(), st.integers(0, 300)), max_size=60)


@pytest.mark.interpreted  # sets the module's switch, which the compiled core binds
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, on=st.booleans())
@example(ops=[(True, repeats.MIN_SPARE_LEN - 1), (False, 5)], on=True)  # too short to keep: a fresh list
@example(ops=[(True, 100), (False, 30), (True, 70), (False, 200)], on=True)  # cut, then grown
@example(ops=[(True, 100)] * (repeats.MAX_SPARE_LISTS + 1), on=True)  # one past the limit
def test_a_spare_list_taken_holds_its_count(ops, on, monkeypatch):
    monkeypatch.setattr(repeats, "SPARE_LISTS", on)
    spares = repeats.SpareIds()
    for is_offer, count in ops:
        if is_offer:
            before = len(spares.lists)
            kept = spares.offer([ANONYMOUS_ID] * count)
            assert kept == (on and before < repeats.MAX_SPARE_LISTS and count >= repeats.MIN_SPARE_LEN)
            assert len(spares.lists) == before + kept
        else:
            kept_lists = list(spares.lists)
            taken = spares.take(count)
            assert taken == [ANONYMOUS_ID] * count
            assert all(taken is not kept for kept in spares.lists)
            assert (taken is kept_lists[-1]) if kept_lists else True  # the last offered, made to length


def run_with_spares(trace, config, on: bool, monkeypatch) -> tuple[list, object, int]:
    """The run (shared runs on), spares on or off, fresh ones; returns the log, the result and the lists taken."""
    spares = repeats.SpareIds()
    taken: list[int] = []
    take = spares.take

    def counted_take(count):
        taken.append(bool(spares.lists))
        return take(count)

    def dismantle_distinct(tree):  # no list held by two nodes (a spare handed out while a node still held it)
        lists = [n.full_pages for n in tree.nodes()] + [n.swa_pages for n in tree.nodes() if n.swa_pages]
        assert len({id(pages) for pages in lists}) == len(lists)
        DISMANTLE(tree)

    spares.take = counted_take
    monkeypatch.setattr(repeats, "SPARE_LISTS", on)
    monkeypatch.setattr(request_module, "SPARE_IDS", spares)
    monkeypatch.setattr(freetoken_tree, "SPARE_IDS", spares)
    monkeypatch.setattr(RadixTree, "dismantle", dismantle_distinct)
    log, _, result = run_logged(trace, config, True, monkeypatch)
    return log, result, sum(taken)


def assert_spare_run_equal(trace, config, monkeypatch) -> int:
    """The two runs equal; returns how many first pages took a spare list with the switch on."""
    spare_log, with_spares, num_taken = run_with_spares(trace, config, True, monkeypatch)
    fresh_log, fresh, num_fresh_taken = run_with_spares(trace, config, False, monkeypatch)
    assert spare_log == fresh_log
    assert_same_run(with_spares, fresh)
    assert num_fresh_taken == 0
    return num_taken


@pytest.mark.interpreted  # patches module flags, which the compiled core binds
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
def test_freetokens_runs_are_the_same_with_spares(case, mode, monkeypatch):
    trace, config = case
    try:
        assert_spare_run_equal(trace, replace(config, mode=mode), monkeypatch)
    except ValueError:  # a configuration FreeToken refuses (e.g. the scan chunk and the page)
        reject()


@pytest.mark.interpreted
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[0][:2])
def test_marconis_runs_are_the_same_with_spares(case, monkeypatch):
    trace, config = case
    try:
        assert assert_spare_run_equal(trace, config, monkeypatch) == 0  # its trees do not own their lists
    except ValueError:  # a configuration the engine refuses
        reject()


@pytest.mark.interpreted
@pytest.mark.parametrize("case", [c[:2] for c in FIXED_CASES])
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_the_fixed_runs_take_spares(case, mode, monkeypatch):
    """A test of the fixed examples: they evict, so later requests' first pages take spare lists (a run that
    never took one would pass anything; they take 4 to 36)."""
    trace, config = case
    assert assert_spare_run_equal(trace, replace(config, mode=mode), monkeypatch) >= 4
