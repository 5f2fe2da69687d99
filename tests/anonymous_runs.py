"""A run logged for the anonymous-id properties (FreeToken's and Marconi's: ``simulate.ANONYMOUS_IDS`` on
against off): every allocation, the ids the FULL and SWA pools hand out, and every tree's nodes, free counts
and eviction counts as the run throws the tree away. Two runs that decide alike log alike. ``run_switched`` is
the same log for a switch's two settings on anonymous pools (counted page lists, shared runs, counted frees).
Both return ``(log, result, ...)``, as ``same_runs.same_both_ways`` runs them."""

from __future__ import annotations

import sim.run.simulate as simulate_module
from sim.cache.components import Component
from sim.cache.pools import ANONYMOUS_ID, Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import simulate
from sim.sched import sglang_event_plans

POOL_ALLOC, POOL_COUNT_OUT, DISMANTLE = Pool.alloc, Pool.count_out, RadixTree.dismantle


def run_logged(trace, config, anonymous: bool, monkeypatch, run=simulate) -> tuple[list, object, list]:
    """The run (``run(trace, config)``, the switch set to ``anonymous``) and its log: every allocation (pool,
    count), every tree's nodes, free counts and eviction counts as the run ends; then the FULL and SWA
    allocations' ids, each with whether its pool is anonymous (Marconi's tuner's throwaway caches always are)."""
    log: list = []
    kv_ids: list = []

    def logged_alloc(pool, count):
        ids = POOL_ALLOC(pool, count)
        log.append((pool.name, count, len(ids)))
        if pool.component is not Component.MAMBA:
            kv_ids.extend((pool.anonymous, page) for page in ids)
        return ids

    def logged_count_out(pool, count):  # an anonymous pool's allocation without its list (the lockstep take)
        POOL_COUNT_OUT(pool, count)
        log.append((pool.name, count, count))
        if pool.component is not Component.MAMBA:
            kv_ids.extend((pool.anonymous, ANONYMOUS_ID) for _ in range(count))

    monkeypatch.setattr(simulate_module, "ANONYMOUS_IDS", anonymous)
    # an SGLang event step's page-only pages counted out of anonymous pools at once are one count a step, where
    # real ids are an allocation a request: allocated one by one here (tests/test_event_step_one_pass_property.py
    # holds the two ways equal on anonymous pools)
    monkeypatch.setattr(sglang_event_plans, "PAGES_AT_ONCE", False)
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(Pool, "count_out", logged_count_out)
    monkeypatch.setattr(RadixTree, "dismantle", tree_logger(log))
    return log, run(trace, config), kv_ids


def tree_logger(log: list, lists: bool = False, held: list | None = None):
    """A ``RadixTree.dismantle`` that first logs the tree's nodes, free counts and eviction counts to ``log``
    (a run, or a tuner's replay, throws its tree away). A node's page lists are logged by length, or with
    ``lists`` as lists (their None entries where SWA was freed included); ``held`` collects each node's FULL
    page list as the tree holds it (its type is what a switch may change)."""

    def pages(node) -> tuple:
        if lists:
            return list(node.full_pages), None if node.swa_pages is None else list(node.swa_pages)
        return len(node.full_pages), node.swa_pages and len(node.swa_pages)

    def logged_dismantle(tree):
        nodes = sorted(tree.nodes(), key=lambda n: (n.start, n.end, n.full_stamp))
        if held is not None:
            held.extend(n.full_pages for n in nodes)
        log.append(
            [
                (n.start, n.end, *pages(n), n.swa_pages is None)
                + (n.state, n.full_stamp, n.full_lock, sorted(n.swa_holders), n.state_lock)
                for n in nodes
            ]
        )
        pools = (tree.full_pool, tree.swa_pool, tree.state_pool)
        page_counts = (tree.num_full_pages, tree.num_swa_pages)
        # a dict last: test_marconi_anonymous_ids counts the trees a run threw away by it
        log.append((page_counts, [p.num_free for p in pools], dict(tree.num_evictions)))
        DISMANTLE(tree)

    return logged_dismantle


def run_switched(
    trace, config, switches: dict, monkeypatch, lists: bool = True, held=None
) -> tuple[list, object]:
    """The run on anonymous pools with each ``(module or class, name): value`` of ``switches`` set, and its log:
    every allocation (pool, its free count before, count; a count out is an allocation without its list) and
    ``tree_logger``'s record of every tree it throws away. A switch's two settings are held equal on it."""
    log: list = []

    def logged_alloc(pool, count):
        log.append((pool.name, pool.num_free, count))
        return POOL_ALLOC(pool, count)

    def logged_count_out(pool, count):
        log.append((pool.name, pool.num_free, count))
        POOL_COUNT_OUT(pool, count)

    for (target, name), value in switches.items():
        monkeypatch.setattr(target, name, value)
    monkeypatch.setattr(simulate_module, "ANONYMOUS_IDS", True)
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(Pool, "count_out", logged_count_out)
    monkeypatch.setattr(RadixTree, "dismantle", tree_logger(log, lists, held))
    return log, simulate(trace, config)
