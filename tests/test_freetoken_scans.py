"""FreeToken's SWA and state eviction scans and its SWA budget, fast against reference.

``evict_swa`` and ``evict_states`` heap ``(stamp, NaN, node)`` triples (``freetoken_scans.SCANS_AS_TRIPLES``) where
FreeToken heaps ``_ByStamp`` entries; ``swa_available`` reads the tree's counts (``AVAILABLE_FROM_COUNTS``) where
FreeToken sums every node. Properties: heapq pops triples and ``_ByStamp`` entries in the same order, whatever the
ties; and a generated run (fan-outs and multi-turn chats on small pools, SWA and GDN models, the three FreeToken
presets, both modes) makes the same evictions (amount asked, amount freed, the pool's free-id stack, the count, the
nodes locked at the call) and reads the same budgets with both switches on as off, and gives the same tables.
"""

from __future__ import annotations

import hashlib
import heapq

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

import sim.cache.engines.freetoken_common as common
import sim.cache.engines.freetoken_scans as scans
import sim.cache.engines.freetoken_swa as swa_rules
from sim.cache.components import MAMBA, SWA
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn

SWA_AVAILABLE = swa_rules.SwaRules.swa_available  # the rule's own, before any test wraps it


@given(
    shape=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6), st.booleans()), max_size=50),
    num_pops=st.integers(0, 50),
)
@example(
    shape=[(0, 3, True), (0, 3, True), (1, 1, True), (1, 1, False), (2, 0, True), (0, 0, True)], num_pops=6
)
def test_triples_pop_as_the_reference_entries(shape, num_pops):
    """A tree of stamped nodes (each under an earlier one or the root; some held): ``_candidates``' triples and
    FreeToken's ``_ByStamp`` list, both heapified, pop the same nodes, ties of stamps and all."""
    tree = RadixTree(1, Pool("full", 1_000), Pool("swa", 1_000), Pool("state", 0))
    nodes = [tree.root]
    for i, (parent_at, stamp, unheld) in enumerate(shape):
        parent = nodes[parent_at % len(nodes)]
        node = tree.add_leaf(parent, seq((str(i), 1)), tree.full_pool.alloc(1), tree.swa_pool.alloc(1))
        node.full_stamp = stamp
        if not unheld:
            node.swa_holders.add("r")
        nodes.append(node)
    triples = scans._candidates(tree, True)
    entries = scans._depth_first(tree, scans.swa_candidate)
    assert [node for _, _, node, _ in triples] == [entry.node for entry in entries]
    heapq.heapify(triples)
    heapq.heapify(entries)
    num_pops = min(num_pops, len(entries))
    assert [heapq.heappop(triples)[2] for _ in range(num_pops)] == [
        heapq.heappop(entries).node for _ in range(num_pops)
    ]


def logged_scan(evict, swa: bool, log: list):
    """``evict`` with its call logged, its list checked against the reference's at each call."""
    keep, comp = (scans.swa_candidate, SWA) if swa else (scans.state_candidate, MAMBA)

    def run(tree, amount):
        reference = [(entry.node.full_stamp, entry.node) for entry in scans._depth_first(tree, keep)]
        assert [(stamp, node) for stamp, _, node, _ in scans._candidates(tree, swa)] == reference
        num_locked = sum(1 for node in tree.nodes() if (node.swa_holders if swa else node.state_lock))
        freed = evict(tree, amount)
        pool = tree.swa_pool if swa else tree.state_pool
        stack = hashlib.sha256(repr(pool.returned_ids()).encode()).hexdigest()
        log.append((amount, freed, stack, tree.num_evictions[comp], num_locked))
        return freed

    return run


def logged_run(trace, config, monkeypatch, fast: bool) -> tuple[tuple[list, list, list], object]:
    swa_evictions: list = []
    state_evictions: list = []
    budgets: list = []
    monkeypatch.setattr(scans, "SCANS_AS_TRIPLES", fast)
    monkeypatch.setattr(swa_rules, "AVAILABLE_FROM_COUNTS", fast)
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: their stack is compared

    def budget(self, manager, req, enough):
        tree, page = manager.tree, manager.page_size
        free, live = manager.pools[SWA].num_free * page, tree.num_swa_pages * page
        budgets.append((enough, free, live, SWA_AVAILABLE(self, manager, req, enough)))
        return budgets[-1][-1]

    monkeypatch.setattr(common, "evict_swa", logged_scan(scans.evict_swa, True, swa_evictions))
    monkeypatch.setattr(common, "evict_states", logged_scan(scans.evict_states, False, state_evictions))
    monkeypatch.setattr(swa_rules.SwaRules, "swa_available", budget)
    return (swa_evictions, state_evictions, budgets), simulate(trace, config)


@st.composite
def cases(draw):
    seed = draw(st.integers(0, 10_000))
    if draw(st.booleans()):
        trace = fanout(
            num_groups=draw(st.integers(1, 3)),
            prompts_per_group=draw(st.integers(6, 20)),
            system_len=draw(st.integers(50, 600)),
            question_len=draw(st.integers(5, 150)),
            output_len=draw(st.integers(10, 200)),
            request_rate=draw(st.sampled_from([2.0, 8.0])),
            seed=seed,
        )
    else:
        trace = multiturn(
            num_sessions=draw(st.integers(3, 6)),
            num_turns=draw(st.integers(2, 4)),
            system_len=draw(st.integers(100, 600)),
            user_len=draw(st.integers(10, 300)),
            output_len=draw(st.integers(10, 300)),
            think_time=0.2,
            request_rate=4.0,
            seed=seed,
        )
    page = draw(st.sampled_from([1, 1, 2, 16]))
    config = SimConfig(
        policy=draw(st.sampled_from(["freetoken", "freetoken-lazy", "freetoken-budget"])),
        model=draw(st.sampled_from(["inkling", "inkling", "tiny-swa", "gemma-4-26b-a4b", "qwen3-next"])),
        knobs=dict(
            page_size=page,
            chunked_prefill_size=page * draw(st.integers(8, 64)),
            max_running_requests=draw(st.integers(2, 4)),
        ),
        pool_tokens=draw(st.integers(2_000, 5_000)) // page * page,
        swa_full_tokens_ratio=draw(st.sampled_from([0.3, 0.5])),  # SWA short while FULL is not
        mamba_states=draw(st.sampled_from([6, 12, 64])),
        mode=draw(st.sampled_from(["replay", "timed"])),
        bounds=False,
    )
    return trace, config


def a_fanout_under_pressure(policy: str = "freetoken", mode: str = "replay"):
    """SWA short while FULL is not, at page 1: its chunks split nodes, whose halves share a stamp (ties)."""
    trace = fanout(
        num_groups=2,
        prompts_per_group=12,
        system_len=400,
        question_len=60,
        output_len=80,
        request_rate=8.0,
        seed=5,
    )
    return trace, small_pools(policy, mode, "inkling", chunk_len=16, max_running=4)


def a_chat_under_pressure(policy: str = "freetoken", mode: str = "replay"):
    """Follow-ups resume from cached windows: budgets read while requests hold nodes."""
    return a_chat(num_turns=3), small_pools(policy, mode, "gemma-4-26b-a4b", chunk_len=32, max_running=2)


def a_gdn_chat_under_pressure(policy: str = "freetoken", mode: str = "replay"):
    """Few state slots: snapshots evicted while resumed ones are locked; a walk stamps its nodes alike (ties)."""
    pools = small_pools(policy, mode, "qwen3-next", chunk_len=64, max_running=2, mamba_states=8)
    return a_chat(num_turns=5), pools


def a_chat(num_turns: int):
    return multiturn(
        num_sessions=4,
        num_turns=num_turns,
        system_len=400,
        user_len=150,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
        seed=3,
    )


def small_pools(
    policy: str, mode: str, model: str, chunk_len: int, max_running: int, mamba_states: int | None = None
) -> SimConfig:
    return SimConfig(
        policy=policy,
        model=model,
        knobs=dict(page_size=1, chunked_prefill_size=chunk_len, max_running_requests=max_running),
        pool_tokens=3_000,
        swa_full_tokens_ratio=0.3,
        mamba_states=mamba_states,
        mode=mode,
        bounds=False,
    )


@pytest.mark.interpreted  # replaces SwaRules.swa_available, which the compiled core compiles
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
@example(case=a_fanout_under_pressure())
@example(case=a_fanout_under_pressure("freetoken-budget", "timed"))
@example(case=a_chat_under_pressure())
@example(case=a_chat_under_pressure("freetoken-lazy", "timed"))
@example(case=a_gdn_chat_under_pressure())
@example(case=a_gdn_chat_under_pressure("freetoken-lazy", "timed"))
def test_fast_scans_and_budget_act_as_the_reference(case, monkeypatch):
    trace, config = case
    same_both_ways(lambda fast: logged_run(trace, config, monkeypatch, fast))


def count_ties(monkeypatch) -> list[int]:
    """Entries of an already-listed stamp in each scan's list, by kind (SWA, states)."""
    num_ties = [0, 0]
    candidates = scans._candidates

    def counted(tree, swa):
        triples = candidates(tree, swa)
        num_ties[0 if swa else 1] += len(triples) - len({stamp for stamp, _, _, _ in triples})
        return triples

    monkeypatch.setattr(scans, "_candidates", counted)
    return num_ties


@pytest.mark.interpreted
@pytest.mark.parametrize("policy,mode", [("freetoken", "replay"), ("freetoken-budget", "timed")])
def test_the_fixed_fanout_evicts_among_ties(policy, mode, monkeypatch):
    """The fixed fan-outs evict SWA with nodes of one stamp in the heap (a split's halves), and read budgets
    short of free pages: a test that never got there would pass anything."""
    num_ties = count_ties(monkeypatch)
    (swa_evictions, _, budgets), _ = logged_run(*a_fanout_under_pressure(policy, mode), monkeypatch, True)
    assert len(swa_evictions) >= 20 and swa_evictions[-1][3] >= 20
    assert num_ties[0] >= 100
    assert sum(1 for enough, free, _, _ in budgets if free < enough) >= 5  # the tree's part read


@pytest.mark.interpreted
@pytest.mark.parametrize("policy,mode", [("freetoken", "replay"), ("freetoken-lazy", "timed")])
def test_the_fixed_chat_reads_budgets_with_windows_held(policy, mode, monkeypatch):
    (swa_evictions, _, budgets), _ = logged_run(*a_chat_under_pressure(policy, mode), monkeypatch, True)
    counted = [(free, live, got) for enough, free, live, got in budgets if free < enough]
    assert len(swa_evictions) >= 5 and len(counted) >= 5
    assert sum(1 for free, live, got in counted if got < free + live) >= 3  # some live node held
    assert sum(1 for *_, num_held in swa_evictions if num_held) >= 3  # the scan passes over held nodes


@pytest.mark.interpreted
@pytest.mark.parametrize("policy,mode", [("freetoken", "replay"), ("freetoken-budget", "replay")])
def test_the_fixed_gdn_chat_evicts_states_among_ties(policy, mode, monkeypatch):
    num_ties = count_ties(monkeypatch)
    (_, state_evictions, _), _ = logged_run(*a_gdn_chat_under_pressure(policy, mode), monkeypatch, True)
    assert len(state_evictions) >= 10 and state_evictions[-1][3] >= 10
    assert num_ties[1] >= 30
    assert (
        sum(1 for *_, num_locked in state_evictions if num_locked) >= 5
    )  # the scan passes over locked states


def gdn_pair():
    """A GDN tree (no SWA pages): a snapshot node with one child, itself a snapshot leaf, older than its parent."""
    tree = RadixTree(1, Pool("full", 100), Pool("swa", 0), Pool("state", 4))
    parent = tree.add_leaf(tree.root, seq(("p", 4)), tree.full_pool.alloc(4), None)
    child = tree.add_leaf(parent, seq(("c", 6)), tree.full_pool.alloc(6), None)
    for node, stamp in ((parent, 2), (child, 1)):
        tree.set_state(node, tree.state_pool.alloc_one())
        node.full_stamp = stamp
    return tree, parent, child


@pytest.mark.parametrize("triples", [True, False])
def test_a_state_eviction_counts_states_and_keeps_a_stateful_parent(triples, monkeypatch):
    """One state asked: the older leaf goes whole, and its parent, a leaf now but holding a state, stays (the
    cascade takes only stateless leaves); two asked: both go, counted one a node."""
    monkeypatch.setattr(scans, "SCANS_AS_TRIPLES", triples)
    tree, parent, child = gdn_pair()
    assert scans.evict_states(tree, 1) == 1
    assert not child.alive and parent.alive and parent.state is not None
    tree, parent, child = gdn_pair()
    assert scans.evict_states(tree, 2) == 2
    assert not child.alive and not parent.alive and tree.num_states == 0
