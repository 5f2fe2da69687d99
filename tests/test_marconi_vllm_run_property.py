"""vLLM+'s page chunks taken as one run (``sim/cache/engines/marconi_vllm_run.py``) are the chunks taken one by
one through the rules' reservation and commit (``MarconiVllmRules.chunk_runs`` off).

Two ``marconi-vllm`` managers, alike but for that switch, run the same requests through ``run_alone`` on
pools of a few dozen pages (every chunk evicts, some requests are refused), pages 1, 2, 16, 32 and 64, SWA on
and off. Observed either by a recorder of every event (the eviction then tells its four events) or by the
miss watcher alone (it then tells one ``LeafEvicted``, the run's own eviction). After every request: the
results, ``snapshot``, stamps, clocks and walk hints, every event in order or the watcher's tables, the
request's locks after each take of page chunks, and the leaf heap's current entries (the run pushes a new
leaf's entry only if it is still a leaf when another reader comes: every current leaf must have one).
Whole runs, replay and timed, bounds on and off, give the same tables and summary.
"""

from __future__ import annotations

import heapq

import pytest
from cache_helpers import parentless_node, seq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode_fast_path_property import snapshot
from test_marconi_vllm_chunks_property import _trace, tight_vllm_caches
from test_marconi_vllm_victims import _delete, _tree
from test_marconi_vllm_watcher_property import Watched
from test_page_chunks_property import Recorded, state, workloads

from sim.cache.engines import marconi_vllm_chain as chain_module
from sim.cache.engines import marconi_vllm_run as run_module
from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_recency import Recency
from sim.cache.engines.marconi_vllm import MarconiVllmRules
from sim.cache.engines.marconi_vllm_chunks import least_recent_leaf
from sim.cache.node import Node
from sim.run.simulate import SimConfig, simulate

_TAKEN = {"handed": 0, "told": 0, "runs": 0, "rules": 0}


def _observed(cache, runs: bool, watched: bool):
    """A manager observed by every event's recorder or by its miss watcher alone; its locks logged after each
    take of page chunks."""
    observed = Watched(*cache, True, True) if watched else Recorded(*cache, fast=True)
    manager = observed.manager
    manager.rules.chunk_runs = runs
    observed.locks = []
    take = manager.take_page_chunks

    def logged(request_id, budget):
        taken = take(request_id, budget)
        req = manager.requests.get(request_id)
        if req is not None:
            held = req.locks
            window = tuple((node.start, node.end, held.holder in node.swa_holders) for node in held.swa_nodes)
            state_node = None if held.state_node is None else held.state_node.end
            observed.locks.append((held.node.end, window, held.swa_covered, state_node, held.in_walk_order))
        return taken

    manager.take_page_chunks = logged
    return observed


def current_entries(manager) -> list[tuple]:
    """The leaf heap's current entries (alive leaves at their stamps) by position, once each; and every leaf of
    the tree must have one."""
    recency, tree = manager.rules.recency, manager.tree
    current = {
        (stamp, node.start, node.end)
        for stamp, _, node in recency.leaves.heap
        if node.alive and not node.children and recency.stamps.get(node.id, 0) == stamp
    }
    leaves = {(recency.stamps.get(n.id, 0), n.start, n.end) for n in tree.nodes() if not n.children and n.parent}
    assert leaves <= current, sorted(leaves - current)
    return sorted(current)


def _stamps(manager) -> tuple:
    """Every node's recency stamp and tree stamps by position, the clocks, eviction counts and stamps kept."""
    tree, recency = manager.tree, manager.rules.recency
    nodes = tuple(
        (n.start, n.end, recency.stamps.get(n.id), n.full_stamp, n.swa_stamp, n.state_stamp) for n in tree.nodes()
    )
    return nodes, tree.clock, recency.now, tree.num_evictions, len(recency.stamps)  # no dead node's stamp kept


def _compare(cache, requests, watched: bool) -> None:
    ours, theirs = _observed(cache, True, watched), _observed(cache, False, watched)
    for index, (family, shared_len, own, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        own_ref = rid if own == 3 else f"own{family}-{own}"
        tokens = seq((f"shared{family}", shared_len), (own_ref, own_len), (f"out-{rid}", output_len))
        prompt_len = shared_len + own_len
        assert ours.run(rid, tokens, prompt_len, output_len) == theirs.run(rid, tokens, prompt_len, output_len)
        assert snapshot(ours.manager) == snapshot(theirs.manager), f"after {rid}"
        assert ours.locks == theirs.locks, f"after {rid}"
        assert current_entries(ours.manager) == current_entries(theirs.manager), f"after {rid}"
        if watched:
            assert ours.tables() == theirs.tables(), f"after {rid}"
            assert _stamps(ours.manager) == _stamps(theirs.manager), f"after {rid}"
        else:
            assert state(ours) == state(theirs), f"after {rid}"
        ours.manager.check_integrity()


@pytest.mark.interpreted
@settings(max_examples=150, deadline=None, derandomize=True)
@given(tight_vllm_caches(), workloads(), st.booleans())
def test_a_run_of_page_chunks_is_the_chunks_one_by_one(cache, requests, watched):
    _compare(cache, requests, watched)


def _counting(monkeypatch):
    """Count the run's own work (the property must compare runs that take it)."""
    evict, take = run_module.evict_top_handing_over, run_module._reserve

    def counted_evict(tree, recency, leaves, victim, told, *deferred):
        _TAKEN["told" if told is not None else "handed"] += 1  # told as one, or the lone eviction's four
        return evict(tree, recency, leaves, victim, told, *deferred)

    def counted_reserve(*args):
        _TAKEN["rules"] += 1
        return take(*args)

    monkeypatch.setattr(run_module, "evict_top_handing_over", counted_evict)
    monkeypatch.setattr(run_module, "_reserve", counted_reserve)


# the property runs once, inside test_the_property_takes_the_runs_own_paths (which also asserts what its examples reach):
# collected on its own too, it ran its examples twice
test_a_run_of_page_chunks_is_the_chunks_one_by_one.__test__ = False


@pytest.mark.interpreted
def test_the_property_takes_the_runs_own_paths(monkeypatch):
    """The runs above evict in the run itself, both told as one and as four, and ask the rules' own
    reservation too (a locked, tied or stale top, a victim exposing its parent)."""
    _TAKEN.update(handed=0, told=0, runs=0, rules=0)
    _counting(monkeypatch)
    monkeypatch.setattr(chain_module, "FUSES_CHAINS", False)  # a chain in one loop takes no counted step
    test_a_run_of_page_chunks_is_the_chunks_one_by_one()
    assert _TAKEN["told"] > 1000 and _TAKEN["handed"] > 1000 and _TAKEN["rules"] > 100, _TAKEN


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize("bounds", [False, True])
def test_whole_runs_are_equal_either_way(mode, bounds, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=bounds, pool_tokens=2400)
    ours = simulate(_trace(), config)
    monkeypatch.setattr(MarconiVllmRules, "chunk_runs", False)
    theirs = simulate(_trace(), config)
    assert ours.summary["evictions_full"] > 100
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=40),
    st.lists(st.tuples(st.integers(0, 39), st.integers(0, 12)), max_size=80),
    st.lists(st.integers(0, 39), max_size=4),
    st.sampled_from([0, 4096]),
    st.sampled_from([3, 12]),
)
def test_the_top_leaf_is_the_heaps_pick(parents, stamps, locked, compact_at, num_stamps):
    """Where ``_top_leaf`` answers, it names ``LeafHeap.pick``'s victim (ties, stale and locked entries,
    duplicates, a heap due for compaction: as ``test_marconi_vllm_victims`` builds them); where it does not,
    ``least_recent_leaf`` does, on the same heap, until no leaf is left."""
    root, nodes = _tree(parents)
    recency = Recency(whole_paths=True)
    ours, theirs = LeafHeap(), LeafHeap()
    for index, stamp in stamps:  # few stamps (3): many ties, some below the heap's second row
        node = nodes[index % len(nodes)]
        stamp %= num_stamps
        recency.stamps[node.id] = stamp
        ours.push(node, stamp)
        theirs.push(node, stamp)
    for index in locked:
        nodes[index % len(nodes)].full_lock += 1
    ours.compact_at = theirs.compact_at = compact_at
    while True:
        expected = theirs.pick(root, recency.of)
        top = run_module.top_leaf(ours, recency.stamps)
        if top is not None:
            assert heapq.heappop(ours.heap)[2] is top is expected
        else:
            assert least_recent_leaf(ours, root, recency) is expected
        if expected is None:
            return
        _delete(recency, [ours, theirs], expected)


def test_a_tie_below_the_heaps_second_row_goes_to_the_pick():
    """A leaf tying the top's stamp at index 2 (index 1 higher): the pick's preorder decides, not the top."""
    root = parentless_node()
    later, first, other = (Node(seq((name, 1)), 0, root, [index], None) for index, name in enumerate("yxz"))
    for index, node in enumerate((first, later, other)):  # ``first`` leads the preorder, ``later`` the ids
        node.edge = (index,)
        root.children[node.edge] = node
    recency, leaves = Recency(whole_paths=True), LeafHeap()
    for node, stamp in ((later, 1), (other, 5), (first, 1)):
        recency.stamps[node.id] = stamp
        leaves.push(node, stamp)
    assert [entry[2] for entry in leaves.heap] == [later, other, first]
    assert run_module.top_leaf(leaves, recency.stamps) is None
    assert LeafHeap.pick(leaves, root, recency.of) is first
