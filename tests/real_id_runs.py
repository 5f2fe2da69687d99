"""A run logged for the real-id properties of FreeToken's switches (``simulate.ANONYMOUS_IDS`` off): every id
every pool hands out, in order, and every tree's nodes (span, FULL and SWA pages, stamp) and free ids as the run
throws the tree away. Two runs that decide alike log alike; a switch's two settings are held equal on it."""

from __future__ import annotations

from same_runs import same_both_ways

from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import simulate

POOL_ALLOC, DISMANTLE = Pool.alloc, RadixTree.dismantle


def run_logged(trace, config, switches: dict, monkeypatch) -> tuple[list, object]:
    """The run with each ``(module, name): value`` of ``switches`` set, on real ids, and its log."""
    log: list = []

    def logged_alloc(pool, count):
        ids = POOL_ALLOC(pool, count)
        log.append((pool.name, list(ids)))
        return ids

    def logged_dismantle(tree):  # the run throws its tree away at its end: its nodes are logged first
        nodes = sorted(tree.nodes(), key=lambda n: (n.start, n.end, n.full_stamp))
        log.append([(n.start, n.end, list(n.full_pages), n.swa_pages, n.full_stamp) for n in nodes])
        log.append((tree.num_swa_pages, tree.full_pool.returned_ids(), tree.swa_pool.returned_ids()))
        DISMANTLE(tree)

    for (module, name), value in switches.items():
        monkeypatch.setattr(module, name, value)
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: they are compared
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(RadixTree, "dismantle", logged_dismantle)
    return log, simulate(trace, config)


def assert_switch_equal(trace, config, module, name: str, monkeypatch) -> None:
    """``module.name`` on and off: the same ids, trees and tables (a configuration refused: rejected)."""
    same_both_ways(lambda on: run_logged(trace, config, {(module, name): on}, monkeypatch))
