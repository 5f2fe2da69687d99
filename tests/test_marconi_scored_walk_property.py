"""Marconi's pick at alpha != 0 scores the candidates as its walk finds them (``marconi_scored.scored_victim``,
switch ``marconi_evict.SCORED_WALK``); ``scan`` then ``_best`` (every candidate's end, recency, efficiency,
each list normalised, then the scores) is the reference. Held to it on generated trees (ages that tie, locks of
every kind, states that move the ends, MAMBA or not, leaves only or not, alphas that tie scores), on generated
caches run request by request at alpha != 0 (each component's pick after every request, every decision and hit),
on the tuner's figures, and on whole runs.
"""

from __future__ import annotations

from unittest import mock

from cache_helpers import hybrid_model
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_anonymous_pages import decisions, request_lists, run_request, tight_marconi_caches
from test_marconi_zero_alpha_property import _tree, tree_nodes

from sim.cache.byte_budget import BYTES
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines import marconi_evict
from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.engines.marconi_scored import scored_victim
from sim.engines.registry import make_manager, make_policy

REACHED = {"not the first candidate": 0, "tied lowest": 0, "one list all equal": 0, "none": 0}
# equal ages and stateless leaves: every score ties, the first wins
ALL_TIED = [(-1, 2, False, 0), (-1, 2, False, 0), (0, 2, True, 0)]
# a state above moves the ends, the oldest leaf is not the first, a locked leaf is older still
LATER_OLDEST = [
    (-1, 1, True, 0),
    (0, 1, False, 0),
    (0, 4, True, 0),
    (-1, 3, True, 0),
    (3, 4, True, 1),
    (3, 0, True, 0),
]
# two leaves of equal age and end: their scores tie below a third's
TIED_LOWEST = [(-1, 1, True, 0), (-1, 4, False, 0), (-1, 4, False, 0), (0, 4, True, 3)]
# the older of two leaves is deeper, below a state: recency decides it (ages 2 and 1 are told apart)
OLDER_DEEPER = [(-1, 1, True, 0), (0, 2, True, 0), (-1, 1, True, 0)]
# a leaf below a stateless node: its efficiency is from the root's end (MAMBA resumes at the last state)
STATELESS_ABOVE = [(-1, 1, False, 0), (0, 2, True, 0), (-1, 1, True, 0), (-1, 1, True, 0), (3, 3, True, 0)]
FIXED = [
    (ALL_TIED, True, 1.0),
    (LATER_OLDEST, True, 0.5),
    (TIED_LOWEST, False, 2.0),
    ([(-1, 2, True, 1)], True, 1.0),
    (OLDER_DEEPER, True, 0.5),
    (STATELESS_ABOVE, True, 1.0),
]


def _reference(root, leaves_only: bool, has_mamba: bool, recency, cost: NodeCost, alpha: float):
    """``scan`` then the whole score (``_best``); the victim, the candidates and their ends."""
    found, ends = marconi_evict.scan(root, leaves_only, has_mamba)
    if not found:
        return None, found, ends
    evictor = marconi_evict.MarconiEvictor(cost, recency, True, False, has_mamba)
    evictor.alpha = alpha
    with mock.patch.object(marconi_evict, "ZERO_ALPHA_BY_RECENCY", False):
        return evictor._best(found, ends)[0], found, ends


@settings(max_examples=500, deadline=None, derandomize=True)
@given(
    tree_nodes, st.integers(4, 6), st.booleans(), st.booleans(), st.sampled_from([0.1, 0.5, 1.0, 1.3, 2.0])
)
@example(ALL_TIED, 6, True, True, 1.0)
@example(LATER_OLDEST, 6, True, True, 0.5)
@example(TIED_LOWEST, 6, False, True, 2.0)
@example([(-1, 2, True, 1)], 6, True, True, 1.0)
@example(OLDER_DEEPER, 6, True, True, 0.5)
@example(STATELESS_ABOVE, 6, True, True, 1.0)
def test_the_scored_walk_picks_the_whole_scores_victim(drawn, now, leaves_only, has_mamba, alpha):
    root, recency = _tree(drawn, now)
    cost = NodeCost(hybrid_model(), 40, "paper")
    victim = scored_victim(root, leaves_only, has_mamba, now, recency.stamps, cost, alpha)
    expected, found, ends = _reference(root, leaves_only, has_mamba, recency, cost, alpha)
    assert victim is expected
    REACHED["none"] += victim is None
    if found:
        REACHED["not the first candidate"] += victim is not found[0]
        ages = [max(now - recency.of(node), 1) for node in found]
        REACHED["one list all equal"] += len(found) > 1 and len(set(ages)) == 1
        # candidates alike in every term of the score tie: the victim is the first of them
        alike = [(age, end, n.end, n.state is None) for age, end, n in zip(ages, ends, found, strict=True)]
        REACHED["tied lowest"] += alike.count(alike[found.index(victim)]) > 1


def test_the_fixed_examples_reach_ties_later_victims_and_empty_picks():
    """Floors on the fixed examples alone."""
    REACHED.update(dict.fromkeys(REACHED, 0))
    for drawn, leaves_only, alpha in FIXED:
        test_the_scored_walk_picks_the_whole_scores_victim.hypothesis.inner_test(
            drawn, 6, leaves_only, True, alpha
        )
    assert all(REACHED.values()), REACHED


def _switched(on: bool):
    return mock.patch.object(marconi_evict, "SCORED_WALK", on)


def _nonzero(knobs: dict, alpha: float) -> dict:
    return {**knobs, "marconi_alpha": alpha, "marconi_follows": "paper"}


@settings(max_examples=150, deadline=None, derandomize=True)
@given(tight_marconi_caches(), request_lists(10), st.sampled_from([0.3, 1.3, 2.0]))
def test_caches_at_alpha_above_0_pick_and_decide_alike(configuration, requests, alpha):
    """After every request each component's pick is the reference's; the requests' hits and the caches'
    decisions are equal either way."""
    model, knobs, sizes = configuration
    knobs = _nonzero(knobs, alpha)
    logs = []
    for on in (True, False):
        cache = make_manager(model, make_policy("marconi", **knobs), sizes)
        evictor, log = cache.rules.evictor(cache), []
        with _switched(on):
            for index, request in enumerate(requests):
                log.append(
                    (run_request(cache, index, request, knobs["chunked_prefill_size"]), decisions(cache))
                )
                if on:
                    for comp in (FULL, SWA, MAMBA, BYTES):
                        picked = evictor.pick(cache.tree, comp)
                        with _switched(False):
                            assert picked == evictor.pick(cache.tree, comp), f"r{index} {comp}"
        logs.append(log)
    assert logs[0] == logs[1]
