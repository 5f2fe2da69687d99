"""A reserve's later picks at alpha != 0 read its last pick's candidates less the victim
(``marconi_scored.KeptCandidates``, switch ``marconi_evict.KEEP_CANDIDATES``); off, every pick walks the tree (the
reference). Held: at every kept pick the kept candidates are the walk's, in its order, and the victim is the
walk's; caches run request by request decide alike either way; the tuner's 21 figures and whole runs are equal.
"""

from __future__ import annotations

from unittest import mock

import pytest
from cache_helpers import hybrid_model
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_anonymous_pages import decisions, request_lists, run_request, tight_marconi_caches

from sim.cache.engines import marconi_evict
from sim.cache.engines.marconi_evict import MarconiEvictor
from sim.cache.engines.marconi_scored import KeptCandidates, scored_victim
from sim.cache.sizing import PoolSizes
from sim.engines.registry import make_manager, make_policy

NUM_KEPT: list[int] = []  # kept picks checked against the walk


def _checked_pick(real):
    """``pick`` that, where it reads kept candidates, first holds them, their efficiencies and the victim to a
    fresh walk's."""

    def pick(evictor: MarconiEvictor, tree, comp: str, kept: KeptCandidates | None = None):
        if kept is None or not kept.current or comp not in ("full", "swa"):
            return real(evictor, tree, comp, kept)
        fresh, recency = KeptCandidates(), evictor.recency
        expected = scored_victim(
            tree.root,
            True,
            evictor.has_mamba,
            recency.now,
            recency.stamps,
            evictor.cost,
            evictor.alpha,
            fresh,
        )
        assert len(kept.found) == len(fresh.found)
        assert all(a is b for a, b in zip(kept.found, fresh.found, strict=True))
        assert kept.efficiency == fresh.efficiency
        picked = real(evictor, tree, comp, kept)
        assert picked[0] is expected
        NUM_KEPT.append(1)
        return picked

    return pick


_SMALL = [(family, 0, 12 + 3 * i, 4) for i, family in enumerate([0, 1, 2, 3] * 4)]
# many small leaves, then long requests that evict several of them in one reserve
MANY_LEAVES = _SMALL + [(0, 30, 180, 20), (1, 0, 150, 30)] + _SMALL[:8] + [(2, 0, 220, 10)]
MANY_LEAVES += _SMALL[8:] + [(3, 0, 230, 5)]
_PAGE_1 = {"page_size": 1, "chunked_prefill_size": 64}
FIXED = [  # SWA and MAMBA, MAMBA alone, SWA alone (pages of 2), and a locked survivor
    ((hybrid_model(window=40), _PAGE_1, PoolSizes(260, 260, 40)), MANY_LEAVES, 1.3),
    ((hybrid_model(swa=False), _PAGE_1, PoolSizes(260, 260, 40)), MANY_LEAVES, 0.3),
    (
        (hybrid_model(mamba=False, window=30), {**_PAGE_1, "page_size": 2}, PoolSizes(150, 150, 4)),
        MANY_LEAVES,
        2.0,
    ),
    # the last request's own locked node (its hit's state, at 100) loses its last child mid-reserve: no candidate
    (
        (hybrid_model(swa=False), {**_PAGE_1, "chunked_prefill_size": 256}, PoolSizes(320, 320, 12)),
        [(1, 0, 25, 3), (0, 100, 20, 5), (0, 160, 20, 5), (2, 0, 20, 3), (3, 0, 40, 3), (0, 100, 200, 5)],
        0.3,
    ),
]


@pytest.mark.interpreted
@settings(max_examples=150, deadline=None, derandomize=True)
@given(tight_marconi_caches(), request_lists(10), st.sampled_from([0.3, 1.3, 2.0]))
@example(*FIXED[0])
@example(*FIXED[1])
@example(*FIXED[2])
@example(*FIXED[3])
def test_caches_pick_and_decide_alike(configuration, requests, alpha):
    """Every kept pick's candidates, efficiencies and victim are a fresh walk's; the requests' hits and the caches' decisions are equal either way."""
    model, knobs, sizes = configuration
    knobs = {**knobs, "marconi_alpha": alpha, "marconi_follows": "paper"}
    logs = []
    for on in (True, False):
        cache, log = make_manager(model, make_policy("marconi", **knobs), sizes), []
        checked = _checked_pick(MarconiEvictor.pick) if on else MarconiEvictor.pick
        with (
            mock.patch.object(marconi_evict, "KEEP_CANDIDATES", on),
            mock.patch.object(MarconiEvictor, "pick", checked),
        ):
            for index, request in enumerate(requests):
                log.append(
                    (run_request(cache, index, request, knobs["chunked_prefill_size"]), decisions(cache))
                )
        logs.append(log)
    assert logs[0] == logs[1]


@pytest.mark.interpreted
def test_the_fixed_examples_read_kept_candidates():
    """A floor on the fixed examples alone, each kept pick held to a fresh walk."""
    NUM_KEPT.clear()
    for drawn in FIXED:
        test_caches_pick_and_decide_alike.hypothesis.inner_test(*drawn)
    assert len(NUM_KEPT) >= 30, len(NUM_KEPT)  # 51


def _switched(on: bool):
    return mock.patch.object(marconi_evict, "KEEP_CANDIDATES", on)
