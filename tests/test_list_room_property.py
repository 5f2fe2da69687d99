"""``repeats.make_room`` (switch ``ROOM_FOR_PROMPT``) against the reference, CPython's own list growth: the list's
items are the same either way, only its allocation differs. ``make_room`` itself: the list keeps its items and is
the same object, it gets room for what it says (a list grown into that room is not moved), and with the switch off
nothing happens. ``RequestCache.add_anonymous_pages`` makes room for the rest of the prompt: a prompt added a
chunk at a time gives the same lists, moved far fewer times. As a property over the generated FreeToken runs
(``test_freetoken_page_lists.page_cases``: three presets, three models, pages 1, 2, 16 and 64, small pools,
bounds on and off; replay and timed) and Marconi's (``test_marconi_anonymous_ids.marconi_cases``) on anonymous
pools: every allocation (pool, free count before it, count), every tree's nodes with their FULL and SWA page
lists, the pools' counts as the run ends, and the run's tables and summary equal with the switch on and off.
Fixed replays hold floors on the room's use, counted in the test's own run.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest
from cache_helpers import manager, seq
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from same_runs import assert_same_run
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases
from test_repeats_property import run_logged

import sim.cache.repeats as repeats
import sim.cache.request as request_module
from sim.cache.locks import LockSet
from sim.cache.pools import ANONYMOUS_ID
from sim.cache.request import RequestCache
from sim.cache.results import MatchResult

EMPTY_LIST_SIZE = sys.getsizeof([])
POINTER_SIZE = 8 if sys.maxsize > 2**32 else 4


def capacity(items: list) -> int:
    """The items CPython has room for (its allocation, read off the object's size)."""
    return (sys.getsizeof(items) - EMPTY_LIST_SIZE) // POINTER_SIZE


@pytest.mark.interpreted  # sets the module's switch, which the compiled core binds
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    num_items=st.integers(0, 3000),
    num_more=st.integers(0, 6000),
    item=st.sampled_from([ANONYMOUS_ID, None, 7]),
    on=st.booleans(),
)
@example(num_items=repeats.MIN_ROOM_LEN - 1, num_more=100, item=ANONYMOUS_ID, on=True)  # the floor: no room
@example(num_items=repeats.MIN_ROOM_LEN, num_more=100, item=ANONYMOUS_ID, on=True)  # len - 4 of room
@example(num_items=1000, num_more=0, item=None, on=True)
@example(num_items=1000, num_more=996, item=ANONYMOUS_ID, on=True)  # the most CPython keeps: len - 4
@example(num_items=1000, num_more=5000, item=ANONYMOUS_ID, on=True)
def test_room_keeps_the_items_and_is_there(num_items, num_more, item, on, monkeypatch):
    monkeypatch.setattr(repeats, "ROOM_FOR_PROMPT", on)
    items = [item] * num_items
    before = capacity(items)
    room = repeats.make_room(items, num_more)
    assert items == [item] * num_items
    has_room = on and num_items >= repeats.MIN_ROOM_LEN
    assert room == (max(0, min(num_more, num_items - 4)) if has_room else 0)
    if not on:
        assert capacity(items) == before
    assert capacity(items) >= num_items + room
    grown = capacity(items)
    items += (item,) * room  # into the room: the allocation stays
    assert capacity(items) == grown and items == [item] * (num_items + room)


def test_room_is_made_in_this_build():
    """Not patched, so it runs compiled too: there ``items.extend`` is a slice assignment that reads no length
    hint, so the room would silently not be made (the first build's make_room did that)."""
    items = [ANONYMOUS_ID] * 1000
    assert repeats.ROOM_FOR_PROMPT and repeats.make_room(items, 900) == 900
    assert capacity(items) >= 1900 and items == [ANONYMOUS_ID] * 1000


def a_request(prompt_len: int, page_size: int) -> RequestCache:
    node = manager("freetoken").tree.root
    return RequestCache(
        "r", seq(("t", prompt_len + 1)), prompt_len, MatchResult(0, 0, node), LockSet("r", node), page_size
    )


def prompt_added(chunks: list[int], has_swa: bool, on: bool, monkeypatch) -> tuple[list, list, int]:
    """A request whose prompt is ``chunks`` pages added a chunk at a time: its lists and how often each moved."""
    monkeypatch.setattr(repeats, "ROOM_FOR_PROMPT", on)
    req = a_request(sum(chunks) * 2, 2)
    moves, last = [0, 0], None
    for num_pages in chunks:
        req.add_anonymous_pages(num_pages, has_swa)
        now = (capacity(req.own_full), capacity(req.own_swa))
        if last is not None:
            moves = [m + (a != b) for m, a, b in zip(moves, now, last, strict=True)]
        last = now
    return req.own_full, req.own_swa, moves


@pytest.mark.interpreted
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(st.integers(1, 400), min_size=1, max_size=40), has_swa=st.booleans())
@example(chunks=[100] * 40, has_swa=True)
@example(chunks=[100] * 40, has_swa=False)
def test_a_prompts_lists_are_the_same_and_moved_less(chunks, has_swa, monkeypatch):
    full, swa, moves = prompt_added(chunks, has_swa, True, monkeypatch)
    ref_full, ref_swa, ref_moves = prompt_added(chunks, has_swa, False, monkeypatch)
    assert full == ref_full == [ANONYMOUS_ID] * sum(chunks)
    assert swa == ref_swa == [ANONYMOUS_ID if has_swa else None] * sum(chunks)
    for num_moves, num_ref_moves in zip(moves, ref_moves, strict=True):
        # at most the room's own move more, where CPython's eighth would have taken what came
        assert num_moves <= num_ref_moves + 1
        if (
            chunks == [100] * 40
        ):  # the fixed floor: 40 chunks, the list copied at nearly each without the room
            assert num_ref_moves >= 15 and num_moves <= 6


def assert_room_run_equal(trace, config, monkeypatch) -> int:
    """The two runs equal (shared runs on in both); returns how often the first made room."""
    made: list[int] = []

    def counted(items, num_more):
        room = repeats.make_room(items, num_more)
        made.append(room)
        return room

    monkeypatch.setattr(request_module, "make_room", counted)
    monkeypatch.setattr(repeats, "ROOM_FOR_PROMPT", True)
    room_log, _, with_room = run_logged(trace, config, True, monkeypatch)
    num_made = sum(1 for room in made if room > 0)
    monkeypatch.setattr(repeats, "ROOM_FOR_PROMPT", False)
    plain_log, _, plain = run_logged(trace, config, True, monkeypatch)
    assert room_log == plain_log
    assert_same_run(with_room, plain)
    return num_made


@pytest.mark.interpreted  # patches module flags, which the compiled core binds
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
def test_freetokens_runs_are_the_same_with_room(case, mode, monkeypatch):
    trace, config = case
    try:
        assert_room_run_equal(trace, replace(config, mode=mode), monkeypatch)
    except ValueError:  # a configuration FreeToken refuses (e.g. the scan chunk and the page)
        reject()


@pytest.mark.interpreted
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[0][:2])
def test_marconis_runs_are_the_same_with_room(case, monkeypatch):
    trace, config = case
    try:
        assert_room_run_equal(trace, config, monkeypatch)
    except ValueError:  # a configuration the engine refuses
        reject()


@pytest.mark.interpreted
@pytest.mark.parametrize("case", [c[:2] for c in FIXED_CASES])
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_the_fixed_runs_make_room(case, mode, monkeypatch):
    """A test of the fixed examples: their prompts take several chunks, so room is made (a run that never made
    any would pass anything)."""
    trace, config = case
    assert assert_room_run_equal(trace, replace(config, mode=mode), monkeypatch) >= 50
