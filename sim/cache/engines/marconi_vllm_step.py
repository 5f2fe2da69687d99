"""vLLM+'s page chunks of one timed step reserved as a chain: the held parent and the deferred watcher of the
replay's chunk run (``marconi_vllm_run.py``), kept across the requests of the step.

A timed step reserves every prefilling request's page chunk (``DefaultScheduler.schedule``) before it commits
any (``postprocess``). Once the pools are full each reservation evicts the leaf heap's top, and the next
request's victim is nearly always the parent the last one exposed (Round 31: 246,709 of 247,176 at 1,000): one
old path, walked up by the requests in turn. Per chunk, that parent's entry was pushed on the heap only to be
popped by the next reservation, and the miss watcher heard each leaf on its own. Here, while the step's
reservations run and nothing else reads the heap or the watcher, the parent's entry is held (taken where
``holds_the_top`` says the heap's top would be it, else pushed) and the victims are kept for the watcher
(``tell_evicted``); both go out before anything else runs: a reservation the steady shape does not take, a
general chunk, the step's admissions and commits (``end_step``). The same statements in the same order but
for the heap's entries' order, which no pick reads (``marconi_vllm_run_steps``). Switch ``HOLDS_ACROSS_STEP``
off: each reservation alone (``hand_top_leaf``), the reference (tests/test_marconi_vllm_step_property.py).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines import marconi_vllm_run
from sim.cache.engines.marconi_vllm_direct import hands_over, takes_direct_nodes, told_as_one
from sim.cache.engines.marconi_vllm_page import hand_top_leaf
from sim.cache.engines.marconi_vllm_run_steps import (
    evict_top_handing_over,
    exposes_nothing_above,
    holds_the_top,
    push_unpushed,
)
from sim.cache.misses import TreeMissTracker
from sim.cache.misses_run import defers_to
from sim.cache.node import Node

if TYPE_CHECKING:
    from sim.cache.engines.marconi import MarconiRules
    from sim.cache.ops import RadixOps

HOLDS_ACROSS_STEP = True  # False: each page chunk's reservation pushes its parent and tells the watcher alone


class StepHold:
    """What a step's reservations keep from the heap and the watcher until ``end_step``: open only between
    ``open_step`` and ``end_step``. It names no rules (they are passed in): the rules own it, and a hold that
    named them back would make the run's cache a cycle only the collector frees (tests/test_gc_pause.py)."""

    def __init__(self) -> None:
        self.is_open = False
        self.told: list | None = None  # the eviction's one observer (``told_as_one``)
        self.held: list[tuple[int, int, Node]] = []  # the last victim's parent's entry, not pushed
        self.evicted: list[Node] | None = (
            None  # the victims the watcher has not heard yet (None: told at once)
        )
        self.watcher: TreeMissTracker | None = None
        # ``marconi_vllm_steady``: whether the run's page chunks may be fused (asked once; None: not yet), and
        # whether this step's are (``steady_applies`` at its open: its commits read it)
        self.fuses: bool | None = None
        self.steady = False


def open_step(hold: StepHold, rules: MarconiRules, manager: RadixOps) -> None:
    """Before a step's page chunks: held where the reservations take the steady shape's statements (the tuner
    done, the direct nodes, one observer of the eviction); the watcher deferred where nobody else hears a thing
    (``take_chunk_run``'s ``quiet``)."""
    if not HOLDS_ACROSS_STEP or not rules.tuner.done or rules.recency.leaves is None:
        return
    tree = manager.tree
    told = told_as_one(tree, manager.events)  # type: ignore[attr-defined]  # a ``CacheManager``
    if told is None or not takes_direct_nodes(tree):
        return
    quiet = marconi_vllm_run.WATCHER_AS_RUN and not (
        manager._checkpoint_saved or manager._inserted or manager.pools[FULL]._freed  # type: ignore[attr-defined]
    )
    hold.watcher = defers_to(told) if quiet else None
    hold.evicted = [] if hold.watcher is not None else None
    hold.told = told
    hold.is_open = True


def end_step(hold: StepHold, rules: MarconiRules) -> None:
    """Before anything but a step's steady reservation reads the cache: the held entry pushed, the watcher told
    the kept victims; the hold closed for the rest of the step."""
    if not hold.is_open:
        return
    hold.is_open = False
    recency = rules.recency
    leaves = recency.leaves
    assert leaves is not None
    push_unpushed(leaves, recency.stamps, None, hold.watcher, hold.evicted, hold.held)
    hold.told, hold.watcher, hold.evicted = None, None, None


def hand_in_step(hold: StepHold, rules: MarconiRules, manager: RadixOps, swa_pages: int) -> bool:
    """``hand_top_leaf`` inside an open step: the held parent taken as the victim where the heap's top would be
    it, else pushed and the top asked; the victim's parent held, the victim kept for the watcher. False: not
    taken (the caller ends the step before its general reservation)."""
    held, leaves = hold.held, rules.recency.leaves
    assert leaves is not None
    pools = manager.topology.pools
    handed_pools = (pools[FULL], pools[SWA], pools[MAMBA])
    if (
        handed_pools[0].num_free >= 1
        and handed_pools[1].num_free >= swa_pages
        and handed_pools[2].num_free >= 1
    ):
        return False  # no pool short: ``hand_top_leaf``'s first answer
    if held and holds_the_top(held[0], leaves, rules.recency.stamps):
        victim = held[0][2]
        if not exposes_nothing_above(victim.parent, rules.has_mamba) or not hands_over(
            victim, swa_pages, handed_pools
        ):
            return False
        held.clear()
        handed = evict_top_handing_over(
            manager.tree, rules.recency, leaves, victim, hold.told, hold.evicted, held, False
        )
        manager.handed_slots = handed  # type: ignore[attr-defined]  # a ``PageChunks``
        return True
    if held:  # pushed as the eviction would have: the heap's own top decides
        heapq.heappush(leaves.heap, held.pop())
    return hand_top_leaf(manager, rules, swa_pages, hold.told, hold.evicted, held)
