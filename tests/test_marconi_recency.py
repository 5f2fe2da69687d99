"""Marconi's LRU presets (SGLang+, vLLM+) keep a whole-path stamp at the path's deepest node alone
(``Recency.whole_paths``): every leaf's stamp, the only one their eviction reads, must be the one stamping
every node of every path gives. Two managers run the same requests on pools of a few dozen pages, so that
walks split nodes, leaves are evicted and their parents become leaves; one stamps lazily (the default), the
other every node (``whole_paths`` off: the step rule); after every segment the caches and every leaf's
stamp are compared.
"""

from __future__ import annotations

from cache_helpers import hybrid_model, seq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode_fast_path_property import Run, snapshot

from sim.cache.sizing import PoolSizes
from sim.engines.registry import PRESETS

LRU_PRESETS = sorted(
    name
    for name, policy in PRESETS.items()
    if policy.engine == "marconi" and getattr(policy.own, "marconi_eviction", None) == "lru"
)


def test_the_lru_presets_are_found():
    assert {"marconi-sglang", "marconi-vllm"} <= set(LRU_PRESETS)


@st.composite
def tight_lru_runs(draw):
    page = draw(st.sampled_from([1, 2, 16, 32]))
    knobs = dict(page_size=page, chunked_prefill_size=page * draw(st.integers(1, 6)))
    model = hybrid_model(swa=draw(st.booleans()), mamba=draw(st.booleans()), window=draw(st.integers(17, 90)))
    tokens_per_pool = draw(st.integers(6, 40)) * 16
    sizes = PoolSizes(-(-tokens_per_pool // page), -(-tokens_per_pool // page), draw(st.integers(3, 12)))
    return draw(st.sampled_from(LRU_PRESETS)), model, knobs, sizes


def _leaf_stamps(run: Run) -> list[tuple[int, int, int]]:
    recency = run.manager.rules.recency
    return [(n.start, n.end, recency.of(n)) for n in run.manager.tree.nodes() if not n.children]


def request_lists(max_size: int):
    """Requests as (shared-prefix family, shared length, own length, output length)."""
    request = st.tuples(st.integers(0, 3), st.integers(0, 200), st.integers(1, 200), st.integers(2, 200))
    return st.lists(request, min_size=2, max_size=max_size)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tight_lru_runs(), request_lists(8))
def test_lazy_whole_path_stamps_evict_as_stamping_every_node(configuration, requests):
    preset, model, knobs, sizes = configuration
    lazy, eager = (Run(preset, model, knobs, fast=True, sizes=sizes) for _ in range(2))
    assert lazy.manager.rules.recency.whole_paths
    eager.manager.rules.recency.whole_paths = False
    for index, (family, shared_len, own_len, output_len) in enumerate(requests):
        tokens = seq((f"shared{family}", shared_len), (f"r{index}", own_len), (f"out-r{index}", output_len))
        for run in (lazy, eager):
            run.start(f"r{index}", tokens, shared_len + own_len, output_len)
            for rid in sorted(run.remaining):
                run.decode(rid, output_len)
        assert snapshot(lazy.manager) == snapshot(eager.manager), f"after r{index}"
        assert _leaf_stamps(lazy) == _leaf_stamps(eager), f"after r{index}"
