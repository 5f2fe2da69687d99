"""vLLM+'s chunk run along an evicted chain: the steady chunks, where each victim is the last victim's held parent
(``holds_the_top``) and each commit one new leaf below the last, taken in one loop with the run's counts kept
as locals and written once.

At 1,000 Mooncake requests 389k of 392k evictions take a node whose parent is the same old request's previous
chunk (no walk ends there, no other child): the run walks one old path bottom up while it hangs its own path
top down, a chunk at a time. Each such chunk went through ``holds_the_top``, ``evict_top_handing_over``,
``evict_handed``, ``commit_chunk`` and ``slide_unreleased``, each asking again what cannot change along the
chain (the heap's top and size: the run pushes nothing; the request's shape; the observers: none but the
deferred watcher) and writing counts that the next chunk undoes (the pools' page, SWA page and state counts,
the FULL-unlocked tokens, the held parent's stamp and entry, the request's fields, the state lock passed a node
down). Here each chunk does what stays: the victim's checks, its stamp popped, its unlinking, the new leaf, its
window lock; the rest is written when the chain stops, before anything but this loop reads it. Switch
``FUSES_CHAINS`` (off: the run's own chunk steps, the reference; tests/test_marconi_vllm_chain_property.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.cache.components import FULL
from sim.cache.engines import marconi_vllm_chain_pass as chain_pass
from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_recency import Recency
from sim.cache.engines.marconi_vllm_run_steps import ChunkKeys, exposes_nothing_above
from sim.cache.locks import let_go_past
from sim.cache.misses import TreeMissTracker
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree

if TYPE_CHECKING:
    from sim.cache.engines.marconi import MarconiRules

FUSES_CHAINS = True


def fits_chain(tree: RadixTree, req: RequestCache, window: int, has_swa: bool) -> bool:
    """What ``commit_chunk`` asks of each chunk that no chunk of the chain changes: the request's node a leaf
    below the root ending at its prefix, its locks in walk order, its window past its SWA frontier and a page;
    no pool's frees heard (an eviction's ``SlotsFreed`` would be emitted)."""
    last, base = req.locks.node, req.prefix_len
    if last.children or last.parent is None or base != last.end or not req.locks.in_walk_order:
        return False
    if has_swa and (req.swa_frontier > base or tree.page_size > window):
        return False
    return not (tree.full_pool._freed or tree.swa_pool._freed or tree.state_pool._freed)


def takes_victim(victim: Node, stamp: int, top: int | None, has_mamba: bool, num_swa: int) -> bool:
    """``holds_the_top`` (the heap's top, ``top``, unchanged along the chain; the entry current by
    construction) and the run's lone-victim checks (``exposes_nothing_above``, one page, a state, its SWA)."""
    if (top is not None and top <= stamp) or victim.children or not victim.alive:
        return False
    if victim.full_lock > 0 or victim.swa_holders or victim.state_lock > 0:
        return False
    if not exposes_nothing_above(victim.parent, has_mamba) or len(victim.full_pages) != 1:
        return False
    swa = victim.swa_pages
    one_swa = swa is None if num_swa == 0 else (swa is not None and len(swa) == 1)
    return one_swa and victim.state is not None


def take_chain(
    tree: RadixTree,
    rules: MarconiRules,
    req: RequestCache,
    keys: ChunkKeys,
    held: list[tuple[int, int, Node]],
    evicted: list[Node] | None,
    has_swa: bool,
    watcher: TreeMissTracker | None = None,
) -> Node | None:
    """The run's next chunks while each takes ``held``'s node as its victim and commits one new leaf (the
    caller: the pools short, LRU over leaves, tuned, a commit's hint deferred; ``evicted``: the watcher's
    tellings deferred, None: told at once, no chain): the last new leaf, ``held`` the chain's next parent;
    None, nothing changed, where the first chunk is not one. ``watcher``: the one ``evicted`` is told to."""
    recency, window, has_mamba = rules.recency, rules.window, rules.has_mamba
    leaves: LeafHeap = recency.leaves  # type: ignore[assignment]  # whole-path recency keeps one
    heap, stamps, page = leaves.heap, recency.stamps, tree.page_size
    if evicted is None or not held or len(heap) + 1 > leaves.compact_at:
        return None
    if not fits_chain(tree, req, window, has_swa):
        return None
    num_swa = 1 if has_swa else 0
    top = heap[0][0] if heap else None
    stamp, _, victim = held[0]
    if stamps.get(victim.id) != stamp:  # kept: unkept (held at 0), its parent may get no entry
        return None
    if chain_pass.ONE_PASS:
        return _take_in_one_pass(tree, rules, req, keys, held, evicted, has_swa, victim, stamp, top, watcher)
    locks, start, prompt_len, source = req.locks, req.prefix_len, req.prompt_len, req.request_id
    last, base, now, clock, unlocked = locks.node, start, recency.now, tree.clock, 0
    node: Node | None = None
    made: list[Node] = []  # the chain's new leaves, for the window's lock (``slide_window_over``)
    parent = victim  # the last victim's parent: the next victim (held), or the root (none held)
    while (
        parent is victim
        and base + page <= prompt_len
        and takes_victim(victim, stamp, top, has_mamba, num_swa)
    ):
        end = base + page
        now += 3  # ``reserve_page``'s tick, then the insert's two
        evicted.append(victim)
        parent = victim.parent
        stamps.pop(victim.id, None)
        del parent.children[victim.edge]
        unlocked -= victim.end - victim.start
        full, swa, slot = victim.full_pages, victim.swa_pages, victim.state
        victim.swa_pages = victim.state = None
        victim.alive = False
        key = keys.cut(base, end)
        node = Node(key, base, last, full, swa if has_swa else None, None, source)  # its path's request
        node.edge = edge = key.runs  # a key of one page is its own first page
        last.children[edge] = node
        node.full_stamp, node.swa_stamp, node.state_stamp = clock + 1, float(clock + 2), clock + 4
        clock += 4
        node.state = slot
        node.full_lock = 1  # ``slide_unreleased``: the FULL lock one node down
        made.append(node)
        stamps[node.id] = now
        last, base = node, end
        if parent.parent is not None:  # the parent holds the victim's stamp where it is higher
            stamp, victim = max(stamps.get(parent.id, 0), stamp), parent
    if node is None:
        return None
    tree.num_evictions[FULL] += (base - start) // page
    _close(tree, recency, req, held, node, parent, stamp, now, clock, unlocked, has_mamba)
    if has_swa and window > 0:
        locks.swa_covered = slide_window_over(made, locks.swa_nodes, locks.holder, locks.swa_covered, window)
    return node


def _take_in_one_pass(
    tree: RadixTree,
    rules: MarconiRules,
    req: RequestCache,
    keys: ChunkKeys,
    held: list[tuple[int, int, Node]],
    evicted: list[Node],
    has_swa: bool,
    victim: Node,
    stamp: int,
    top: int | None,
    watcher: TreeMissTracker | None,
) -> Node | None:
    """``take_chain``'s loop and close where ``chain_pass.ONE_PASS``: the chunks hung in one pass, the window
    slid once over the leaves it keeps."""
    recency, window, has_mamba, start = rules.recency, rules.window, rules.has_mamba, req.prefix_len
    hung = chain_pass.hang_chain(
        tree, req, keys, evicted, recency.stamps, victim, stamp, top, recency.now, has_mamba, has_swa, watcher
    )
    node, parent, stamp, now, clock, unlocked, count = hung
    if node is None:
        return None
    page = tree.page_size
    tree.num_evictions[FULL] += (node.end - start) // page
    _close(tree, recency, req, held, node, parent, stamp, now, clock, unlocked, has_mamba)
    if has_swa and window > 0:
        locks = req.locks
        locks.swa_covered = chain_pass.slide_once(
            node, count, locks.swa_nodes, locks.holder, locks.swa_covered, window, page
        )
    return node


def slide_window_over(made: list[Node], nodes: list[Node], holder: str, covered: int, window: int) -> int:
    """``slide_unreleased``'s window slid over each of ``made`` in turn (each held at the bottom, then the top
    nodes past the window's cover let go), as one slide: the pops come in the same order (the cover only grows
    between them), and a new leaf held then let go within the chain is left as it was (its holders empty): the
    window's cover after it."""
    nodes[:0] = made[::-1]
    for node in made:
        covered += node.end - node.start
    # a new leaf let go here was never held (the per-chunk slide adds, then discards)
    covered = let_go_past(nodes, covered, window, holder)
    for node in nodes[: len(made)]:  # the new leaves still held: the front of the list
        node.swa_holders.add(holder)
    return covered


def _close(
    tree: RadixTree,
    recency: Recency,
    req: RequestCache,
    held: list[tuple[int, int, Node]],
    node: Node,
    parent: Node,
    stamp: int,
    now: int,
    clock: int,
    unlocked: int,
    has_mamba: bool,
) -> None:
    """What the chain's chunks left to write: the next parent's stamp and held entry (none past the root), the
    counts, the clocks, the state lock moved to the last leaf, the request at its end."""
    held.clear()
    if parent.parent is not None:
        stamps = recency.stamps
        stamps[parent.id] = stamp
        held.append((stamp, parent.id, parent))
    recency.now, tree.clock = now, clock
    tree.num_unlocked_tokens += unlocked
    locks = req.locks
    old_state = locks.state_node
    if old_state is not None:
        old_state.state_lock -= 1
        locks.state_node = None
    if has_mamba:
        node.state_lock += 1
        locks.state_node = node
    locks.node = node
    req.kv_len = req.prefix_len = node.end
    req.earlier_checkpoint = None
