"""The steady chunk's pieces of vLLM+'s chunk run (``marconi_vllm_run.py``): the victim on the leaf heap's top,
its eviction with its slots handed to the chunk, and the chunk's key cut from its run.

A run evicts one old request's path bottom up: the victim's parent, a leaf now, takes the victim's stamp (the
heap's lowest) and is the next chunk's victim (99.7% of 392k evictions at 1,000 Mooncake requests, chains of
~340). Pushed and popped at once, its entry went through the heap twice a chunk for nothing; held instead
(``holds_the_top``, switch ``marconi_vllm_run.HOLDS_PARENTS``), it is taken where ``top_leaf`` would answer
with it, else pushed, as it is before anything but the run reads the heap (``push_unpushed``): the heap holds
the same entries whenever anything reads it, in another order (no pick reads the order). Each commit's walk
hint (``WalkHints.remember``: the request's node, a page deeper each chunk) is remembered once a run, the last
(``remember_deferred``, switch ``DEFERS_HINTS``). tests/test_marconi_vllm_held_parent_property.py holds both."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from sim.cache.components import FULL
from sim.cache.counted_pages import PageList
from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_recency import Recency
from sim.cache.engines.marconi_vllm_direct import evict_lone_leaf
from sim.cache.events import LeafEvicted, SlotsFreed, emit
from sim.cache.misses import TreeMissTracker
from sim.cache.misses_run import tell_evicted
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq


def top_leaf(leaves: LeafHeap, stamps: dict[int, int]) -> Node | None:
    """``least_recent_leaf``'s answer where the heap's top is a current, unlocked leaf that no other entry
    ties (the lowest of the rest, at index 1 or 2, has a higher stamp), left on the heap for the caller to
    pop; else None (``least_recent_leaf`` decides)."""
    heap = leaves.heap
    if not heap or len(heap) > leaves.compact_at:
        return None
    stamp, node_id, node = heap[0]
    if not node.alive or node.children or stamps.get(node_id, 0) != stamp:
        return None
    if node.full_lock > 0 or node.swa_holders or node.state_lock > 0:
        return None
    size = len(heap)
    if (size > 1 and heap[1][0] == stamp) or (size > 2 and heap[2][0] == stamp):
        return None
    return node


def holds_the_top(held: tuple[int, int, Node], leaves: LeafHeap, stamps: dict[int, int]) -> bool:
    """Whether ``top_leaf`` would answer with ``held``'s node were the entry pushed (nothing but the run has
    read the heap since it was held): below every other entry's stamp (a tie at the top goes to the pick), the
    heap not due for compaction, the entry current and its leaf unlocked."""
    heap = leaves.heap
    stamp, node_id, node = held
    if (heap and heap[0][0] <= stamp) or len(heap) + 1 > leaves.compact_at:
        return False
    if not node.alive or node.children or stamps.get(node_id, 0) != stamp:
        return False
    return not (node.full_lock > 0 or node.swa_holders or node.state_lock > 0)


def evict_handed(
    tree: RadixTree,
    leaves: LeafHeap,
    stamps: dict[int, int],
    victim: Node,
    told: Callable[[LeafEvicted], None],
    deferred: list[Node] | None = None,
    held: list[tuple[int, int, Node]] | None = None,
) -> None:
    """``evict_lone_leaf(tree, recency, victim, True, [told])``: the same statements in the same order.
    ``deferred``: the victim kept there for the caller to tell the watcher (``misses_run.tell_evicted``).
    ``held``: the parent's heap entry kept there, not pushed, for the caller to push or take (``holds_the_top``)."""
    tree.num_evictions[FULL] += 1
    if deferred is None:
        told(LeafEvicted(victim))
    else:
        deferred.append(victim)
    parent = victim.parent
    stamp = stamps.pop(victim.id, None)
    pushed = False
    if stamp is not None and parent.parent is not None:
        pushed = True
        merged = max(stamps.get(parent.id, 0), stamp)
        stamps[parent.id] = merged
        if held is None:
            heapq.heappush(leaves.heap, (merged, parent.id, parent))
        else:
            held.append((merged, parent.id, parent))
    del parent.children[victim.edge]
    full = victim.full_pages
    if tree.full_pool._freed:
        emit(tree.full_pool._freed, SlotsFreed(tree.full_pool.component, full))
    tree.num_full_pages -= len(full)
    tree.num_unlocked_tokens -= victim.end - victim.start
    swa = victim.swa_pages
    if swa is not None:
        if tree.swa_pool._freed:
            emit(tree.swa_pool._freed, SlotsFreed(tree.swa_pool.component, swa))
        tree.num_swa_pages -= len(swa)
        victim.swa_pages = None
    state = victim.state
    if state is not None:
        if tree.state_pool._freed:
            emit(tree.state_pool._freed, SlotsFreed(tree.state_pool.component, [state]))
        tree.num_states -= 1
        victim.state = None
    victim.alive = False
    if parent.parent is not None and not parent.children and not pushed:
        if held is None:
            heapq.heappush(leaves.heap, (stamps.get(parent.id, 0), parent.id, parent))
        else:
            held.append((stamps.get(parent.id, 0), parent.id, parent))


def push_unpushed(
    leaves: LeafHeap,
    stamps: dict[int, int],
    node: Node | None,
    watcher: TreeMissTracker | None,
    evicted: list[Node] | None,
    held: list[tuple[int, int, Node]],
) -> None:
    """Before anything but the run reads the cache: the heap entry ``recency.set`` pushed for ``node`` at its
    commit, pushed now (its stamp is unchanged: nothing but the run ran since, and the run stamps only its new
    leaves); the held parent's entry pushed as the eviction would have; the watcher told the run's evictions
    kept in ``evicted``."""
    if watcher is not None:
        tell_evicted(watcher, evicted)  # type: ignore[arg-type]  # kept wherever there is a watcher
    if node is not None:
        heapq.heappush(leaves.heap, (stamps[node.id], node.id, node))
    if held:
        heapq.heappush(leaves.heap, held.pop())


def remember_deferred(tree: RadixTree, req: RequestCache, hint: Node | None) -> None:
    """Before anything but the run reads the cache: the walk hint the run's commits since the last that
    remembered its own would have left, ``remember(req.tokens, hint)`` once for the last commit's (None: no
    commit since). Each deferred one remembers a node a page below the last remembered on the same path (never
    returning early) and forgets every head only where the first of them would (its own head is kept, nothing
    else writes a hint); where no commit was deferred, ``hint`` is the one just remembered: it returns at once."""
    if hint is not None:
        tree.hints.remember(req.tokens, hint)


class ChunkKeys:
    """``chunk_key(tokens, start, end)`` for chunks in increasing order: the run holding ``start`` found by
    walking on from the last chunk's (the last run starting at or before it, as ``bisect_right`` finds it)."""

    def __init__(self, tokens: TokenSeq) -> None:
        self.tokens, self.runs, self.starts = tokens, tokens.runs, tokens._run_starts()
        self.index = 0

    def cut(self, start: int, end: int) -> TokenSeq:
        tokens = self.tokens
        if start == 0 and end == tokens.length:
            return tokens
        runs, starts, index = self.runs, self.starts, self.index
        last = len(runs) - 1
        while index < last and starts[index + 1] <= start:
            index += 1
        self.index = index
        run, run_start = runs[index], starts[index]
        run_end = run_start + run[2]
        if end > run_end:
            return tokens.slice(start, end)
        if start == run_start and end == run_end:
            return TokenSeq((run,), end - start)
        return TokenSeq(((run[0], run[1] + start - run_start, end - start),), end - start)


def evict_top_handing_over(
    tree: RadixTree,
    recency: Recency,
    leaves: LeafHeap,
    victim: Node,
    told: list | None,
    deferred: list[Node] | None = None,
    held: list[tuple[int, int, Node]] | None = None,
    on_heap: bool = True,
) -> tuple[list[int], list[int | None], int]:
    """``reserve_page``'s tick and least recent leaf, ``victim`` (the heap's top: its entry popped), evicted
    with its slots handed to the chunk (``told``: the eviction's one observer, or None): its page, SWA page (or
    None) and state, as the pools would hand them out. ``deferred``, ``held``: as ``evict_handed`` keeps them
    (``held`` only with ``told``). ``on_heap`` False: the victim's entry was held, never pushed: none popped."""
    recency.now += 1
    if on_heap:
        heapq.heappop(leaves.heap)  # ``least_recent_leaf`` pops the entry it answers with
    swa = victim.swa_pages
    own_swa: list[int | None] = [None] if swa is None else swa  # type: ignore[assignment]
    handed = (victim.full_pages, own_swa, victim.state)
    if told is not None:
        evict_handed(tree, leaves, recency.stamps, victim, told[0], deferred, held)
    else:
        evict_lone_leaf(tree, recency, victim, True, None)
    return handed  # type: ignore[return-value]


def exposes_nothing_above(parent: Node, has_mamba: bool) -> bool:
    """``exposes_nothing(victim, has_mamba)`` of the victim's ``parent``."""
    return (
        parent.parent is None
        or len(parent.children) > 1
        or parent.state is not None
        or parent.full_lock > 0
        or bool(parent.swa_holders)
        or parent.state_lock > 0
        or not has_mamba
    )


def one_page(pages: PageList | None) -> bool:
    return pages is not None and len(pages) == 1
