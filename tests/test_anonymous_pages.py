"""Marconi's tuner replays its window on throwaway caches whose FULL and SWA pools hand out one anonymous id
(``Pool.make_anonymous``): no rule reads which ids a holder has, so such a cache must decide exactly as one
handing out real ids. Two caches, one of each, run the same requests alone (``run_alone``, as the tuner runs
them) on pools of a few dozen pages, so that requests share prefixes, leaves and states are evicted and
requests are refused; after every request their hits, trees (spans, page counts, states, locks), recency
stamps, pool counts and eviction counts are compared. An anonymous pool alone is held to a real one's counts
and refusals over random allocations and frees.
"""

from __future__ import annotations

import pytest
from cache_helpers import hybrid_model, seq
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.errors import PoolExhausted, ReplayRefused
from sim.cache.pools import ANONYMOUS_ID, Pool
from sim.cache.sizing import PoolSizes
from sim.cache.solo_run import run_alone
from sim.engines.registry import make_manager, make_policy


@st.composite
def tight_marconi_caches(draw):
    page = draw(st.sampled_from([1, 1, 2, 16]))
    knobs = dict(
        page_size=page,
        chunked_prefill_size=page * draw(st.integers(1, 6)),
        marconi_alpha=draw(st.sampled_from([0.0, 0.5, 1.3, 2.0])),
        marconi_follows=draw(st.sampled_from(["paper", "code"])),
    )
    model = hybrid_model(swa=draw(st.booleans()), mamba=draw(st.booleans()), window=draw(st.integers(17, 90)))
    tokens_per_pool = draw(st.integers(6, 40)) * 16
    sizes = PoolSizes(-(-tokens_per_pool // page), -(-tokens_per_pool // page), draw(st.integers(3, 12)))
    return model, knobs, sizes


def request_lists(max_size: int):
    """Requests as (shared-prefix family, shared length, own length, output length)."""
    request = st.tuples(st.integers(0, 3), st.integers(0, 200), st.integers(1, 200), st.integers(2, 120))
    return st.lists(request, min_size=2, max_size=max_size)


def cache_pair(model, knobs: dict, sizes: PoolSizes):
    """A cache handing out real ids and an anonymous one, made as the tuner makes its caches."""
    policy = make_policy("marconi", **knobs)
    main = make_manager(model, policy, sizes)
    return main.empty_like(policy), main.empty_like(policy, anonymous_pages=True)


def run_request(manager, index: int, request: tuple[int, int, int, int], chunk: int) -> tuple:
    """One request alone, as the tuner replays it: its hit and ends, or the refusal (then aborted)."""
    family, shared_len, own_len, output_len = request
    tokens = seq((f"shared{family}", shared_len), (f"r{index}", own_len), (f"out-r{index}", output_len))
    prompt_len = shared_len + own_len
    try:
        run = run_alone(manager, f"r{index}", tokens, prompt_len, output_len, chunk)
    except ReplayRefused:
        if f"r{index}" in manager.requests:
            manager.abort(f"r{index}")
        return ("refused",)
    return run.match.cached_len, run.end_iteration, run.inserted_len, tuple(run.peak_usage.items())


def decisions(manager) -> tuple:
    """What the cache decided, with no page id in it: the page lists' lengths stand for them."""
    recency = manager.rules.recency
    nodes = tuple(
        (
            n.start,
            n.end,
            len(n.full_pages),
            None if n.swa_pages is None else len(n.swa_pages),
            n.state,
            n.full_lock,
            n.state_lock,
            recency.of(n),
        )
        for n in manager.tree.nodes()
    )
    pools = tuple((comp, pool.num_free) for comp, pool in manager.pools.items())
    return nodes, pools, tuple(manager.usage().items()), tuple(manager.tree.num_evictions.items())


@settings(max_examples=250, deadline=None, derandomize=True)
@given(tight_marconi_caches(), request_lists(10))
def test_a_cache_with_anonymous_pages_decides_as_one_with_real_ids(configuration, requests):
    model, knobs, sizes = configuration
    real, anonymous = cache_pair(model, knobs, sizes)
    for index, request in enumerate(requests):
        ran = [
            run_request(cache, index, request, knobs["chunked_prefill_size"]) for cache in (real, anonymous)
        ]
        assert ran[0] == ran[1], f"r{index}"
        assert decisions(real) == decisions(anonymous), f"after r{index}"
    assert not anonymous.requests and all(
        page == ANONYMOUS_ID for node in anonymous.tree.nodes() for page in node.full_pages
    )


def test_the_pair_evicts_and_refuses():
    """The property above is not met by caches that never evict: a hand-made window that does both."""
    knobs = {"page_size": 1, "chunked_prefill_size": 64}
    real, anonymous = cache_pair(hybrid_model(window=40), knobs, PoolSizes(300, 300, 6))
    requests = [(i % 2, 60, 30 + 7 * i, 20 + i) for i in range(12)] + [(0, 150, 700, 40)]
    results = []
    for index, request in enumerate(requests):
        results.append([run_request(cache, index, request, 64) for cache in (real, anonymous)])
        assert decisions(real) == decisions(anonymous)
    assert all(a == b for a, b in results)
    assert sum(real.tree.num_evictions.values()) > 5
    assert results[-1][0] == ("refused",) and sum(a[0] > 0 for a, _ in results[:-1]) == 8


operations = st.lists(st.tuples(st.sampled_from(["alloc", "free"]), st.integers(0, 40)), max_size=60)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, 100), operations)
def test_an_anonymous_pool_counts_and_refuses_as_a_real_one(size, ops):
    real, anonymous = Pool("real", size), Pool("anonymous", size)
    anonymous.make_anonymous()
    held: list[tuple[list[int], list[int]]] = []
    for op, count in ops:
        if op == "free" and held:
            freed = held.pop(count % len(held))
            real.free(freed[0])
            anonymous.free(freed[1])
        else:
            try:
                got = real.alloc(count)
            except PoolExhausted:
                with pytest.raises(PoolExhausted):
                    anonymous.alloc(count)
                continue
            ids = anonymous.alloc(count)
            assert ids == [ANONYMOUS_ID] * len(got)
            held.append((got, ids))
        assert (real.num_free, real.num_used) == (anonymous.num_free, anonymous.num_used)


def test_only_an_empty_pool_turns_anonymous():
    pool = Pool("p", 4)
    pool.alloc(1)
    with pytest.raises(AssertionError):
        pool.make_anonymous()
