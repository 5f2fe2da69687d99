"""FreeToken's insert cuts the request's own page lists in place (``freetoken_insert.LISTS_IN_PLACE``) instead of
copying each part: the suffix keeps the request's lists, the tombstone below the frontier keeps their head, and
the freed head of the SWA list is read at its end, not copied. As a property over the generated FreeToken runs
of ``test_freetoken_leaf_heap`` (SWA, SWA + GDN and GDN models; the three presets; small pools; replay and
timed) with short windows, pages 1, 2, 16 and 64, bounds on and off: every id every pool hands out, in order,
every tree's nodes as the run ends (span, FULL and SWA pages, stamp), the pools' free ids and the run's tables
equal the reference's, where every part is a copy.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from real_id_runs import assert_switch_equal
from test_freetoken_path_runs import short_window_cases

import sim.cache.engines.freetoken_insert as insert
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig
from sim.trace.generate import multiturn


@st.composite
def page_cases(draw):
    """``short_window_cases``, some at page 64 (chunk and pools rounded to it), bounds on or off."""
    trace, config = draw(short_window_cases())
    if draw(st.booleans()):
        knobs = config.knobs
        page = 64
        chunk = max(knobs["chunked_prefill_size"] // page, 2) * page
        config = replace(
            config,
            knobs={**knobs, "page_size": page, "chunked_prefill_size": chunk},
            pool_tokens=max(config.pool_tokens // page, 16) * page,
        )
        if "window" in knobs:
            config = replace(config, knobs={**config.knobs, "window": max(knobs["window"] // page, 1) * page})
    return trace, replace(config, bounds=draw(st.booleans()))


def assert_lists_in_place_equal(trace, config, monkeypatch) -> None:
    assert_switch_equal(trace, config, insert, "LISTS_IN_PLACE", monkeypatch)


@pytest.mark.interpreted  # patches Pool.alloc and a module flag, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases())
def test_lists_in_place_equal_the_copies(case, monkeypatch):
    trace, config = case
    assert_lists_in_place_equal(trace, config, monkeypatch)  # a configuration FreeToken refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("page", [1, 16])
def test_a_recomputed_suffix_cuts_a_tombstone_head(page, monkeypatch):
    """A test of the generator: inserts do cut a tombstone head off a recomputed suffix (the branch the
    in-place cut changes most); and one fixed case of it, held to the reference."""
    dead_cuts: list[int] = []
    add_leaf = RadixTree.add_leaf

    def counted(tree, parent, key, full_pages, swa_pages, state=None):
        if swa_pages is None and tree.swa_pool is not tree.full_pool:
            dead_cuts.append(len(full_pages))
        return add_leaf(tree, parent, key, full_pages, swa_pages, state)

    monkeypatch.setattr(RadixTree, "add_leaf", counted)
    trace = multiturn(
        num_sessions=4,
        num_turns=6,
        system_len=300,
        user_len=100,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
        seed=1,
    )
    config = SimConfig(
        policy="freetoken",
        model="gemma-4-26b-a4b",
        knobs=dict(page_size=page, chunked_prefill_size=page * 16, max_running_requests=2, window=32),
        pool_tokens=1_600 // page * page,
        mode="replay",
        bounds=False,
    )
    assert_lists_in_place_equal(trace, config, monkeypatch)
    assert sum(size > 1 for size in dead_cuts) >= 4
