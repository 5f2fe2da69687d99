"""Locks that keep a running request's cached prefix from being evicted under it.

FULL: every node from ``last_node`` up to the root. SWA: live nodes from ``last_node`` upward until a
window's worth of tokens is covered (tombstones skipped). MAMBA: the state the request resumed from.

``slide`` moves a lock set one node down the holder's path (the node an insert of the next chunk ends on,
a child of the locked node) without rebuilding it: the window gains that node and drops the nodes that fall
out of it at its top. It is the rebuild (``unlock`` then ``lock``) only where the window's walk from the old
node is still what it was (``LockSet.in_walk_order``: no split since) and releases are not recorded (the
caller's rules say so: ``EngineRules.slides_window_locks``); tests/test_sliding_locks_property.py holds it
to the rebuild.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from sim.cache.node import Node
from sim.cache.tree import RadixTree
from sim.cache.tree_runs import surface

# True: the FULL passes add their unlocked tokens up in a local and write the tree's count once, and ``unlock``
# tells the tree only of the nodes it may act on (a ``leaves_only`` strategy: the holder's own node, the one
# node of its path that can be a leaf); False: the reference, per node (tests/test_lean_path_loops.py)
LEAN_LOOPS = True


@dataclass
class LockSet:
    holder: str
    node: Node  # the FULL lock runs from here to the root
    swa_nodes: list[Node] = field(default_factory=list)
    state_node: Node | None = None
    swa_covered: int = 0  # tokens of the nodes in ``swa_nodes``
    # ``swa_nodes`` is the window's walk from ``node`` (a split appends out of order)
    in_walk_order: bool = True

    def __init__(self, holder: str, node: Node) -> None:  # native when compiled (``RequestCache.__init__``)
        self.holder, self.node, self.swa_nodes, self.state_node = holder, node, [], None
        self.swa_covered, self.in_walk_order = 0, True


def lock(
    tree: RadixTree,
    holder: str,
    node: Node,
    window: int,
    has_swa: bool,
    has_mamba: bool,
    locked_above: Node | None = None,
) -> LockSet:
    """Lock ``node``'s path. ``locked_above``: an ancestor whose path this holder already locks (an
    insert extends the request's own path), so only the nodes below it gain a FULL lock."""
    held = LockSet(holder, node)
    stop = tree.root if locked_above is None else locked_above
    if LEAN_LOOPS:
        _lock_path(tree, node, stop)
    else:
        _lock_path_per_node(tree, node, stop)
    _lock_window_and_state(held, node, tree, window, has_swa, has_mamba)
    return held


def _lock_path(tree: RadixTree, node: Node, stop: Node) -> None:
    """The FULL locks from ``node`` up to ``stop`` (excluded), the tree's count of unlocked tokens written once."""
    num_locked = 0  # tokens of the nodes this lock is the first on
    while node is not stop:
        num_holders = node.full_lock  # read once
        if num_holders == 0:
            num_locked += node.end - node.start
        node.full_lock = num_holders + 1
        node = node.parent
    tree.num_unlocked_tokens -= num_locked


def _lock_path_per_node(tree: RadixTree, node: Node, stop: Node) -> None:
    """``_lock_path``, the reference: the count written at each node."""
    while node is not stop:
        if node.full_lock == 0:
            tree.num_unlocked_tokens -= node.end - node.start
        node.full_lock += 1
        node = node.parent


def _lock_window_and_state(
    held: LockSet, node: Node, tree: RadixTree, window: int, has_swa: bool, has_mamba: bool
) -> None:
    holder = held.holder
    covered, current = 0, node
    while has_swa and current is not tree.root and covered < window:
        if current.swa_pages is not None:
            if current.cuts is not None:  # a run node: the window ends at one of its pieces (``tree_runs``)
                _cut_at_window(tree, current, window - covered)
            current.swa_holders.add(holder)
            held.swa_nodes.append(current)
            covered += current.end - current.start
        current = current.parent
    held.swa_covered = covered
    if has_mamba and node.state is not None:
        node.state_lock += 1
        held.state_node = node


def _cut_at_window(tree: RadixTree, node: Node, needed: int) -> None:
    """The run's pieces above the one that completes the window made a node of their own (not held)."""
    cuts = node.cuts
    assert cuts is not None
    at = bisect_right(cuts, node.end - needed) - 1  # the deepest cut with ``needed`` tokens below it
    if at >= 0:
        surface(tree, node, cuts[at])


def unlock(tree: RadixTree, held: LockSet, keep_from: Node | None = None) -> None:
    """Release ``held``; ``keep_from``: the FULL locks from this node up stay (the holder's new path)."""
    stop = tree.root if keep_from is None else keep_from
    if LEAN_LOOPS and tree.leaves_only:
        _unlock_leaves_only(tree, held, stop)
    else:
        current = held.node
        while current is not stop:
            current.full_lock -= 1
            if current.full_lock == 0:
                tree.num_unlocked_tokens += current.end - current.start
                tree.release(current)
            current = current.parent
        for node in held.swa_nodes:
            node.swa_holders.discard(held.holder)
            tree.release(node)
    if held.state_node is not None:
        held.state_node.state_lock -= 1
        tree.release(held.state_node)


def _unlock_leaves_only(tree: RadixTree, held: LockSet, stop: Node) -> None:
    """``unlock``'s FULL and SWA passes where the tree's strategy hears only of leaves (``tree.release`` of a
    node with children does nothing): above ``held.node`` every node of the path has a child, so only it and
    the window's childless nodes are told, in the reference's order (the FULL pass first)."""
    current, num_unlocked = held.node, 0
    while current is not stop:
        num_holders = current.full_lock - 1  # read once
        current.full_lock = num_holders
        if num_holders == 0:
            num_unlocked += current.end - current.start
        current = current.parent
    tree.num_unlocked_tokens += num_unlocked
    node = held.node
    if node is not stop and node.full_lock == 0 and not node.children:
        tree.release(node)
    holder = held.holder
    for node in held.swa_nodes:
        node.swa_holders.discard(holder)
        if not node.children:
            tree.release(node)


def slide(tree: RadixTree, held: LockSet, node: Node, window: int, has_swa: bool, has_mamba: bool) -> None:
    """Move ``held`` down to ``node``, a child of ``held.node``, as ``unlock(keep_from=held.node)`` then
    ``lock(locked_above=held.node)`` would, in place; ``held.in_walk_order`` must hold."""
    if node.full_lock == 0:
        tree.num_unlocked_tokens -= node.end - node.start
    node.full_lock += 1
    if has_swa and window > 0:
        _slide_window(held, node, tree, window)
    old_state = held.state_node
    if old_state is not None:
        old_state.state_lock -= 1
        tree.release(old_state)
        held.state_node = None
    if has_mamba and node.state is not None:
        node.state_lock += 1
        held.state_node = node
    held.node = node


def _slide_window(held: LockSet, node: Node, tree: RadixTree, window: int) -> None:
    """The window's walk from ``node``: ``node`` if live, then the old walk's nodes while fewer than ``window``
    tokens lie below each (the walk from the parent, already in ``swa_nodes``, visits the same nodes)."""
    nodes = held.swa_nodes
    if node.swa_pages is not None:
        node.swa_holders.add(held.holder)
        nodes.insert(0, node)
        held.swa_covered += node.end - node.start
    covered = held.swa_covered
    while len(nodes) > 1:  # the walk stops once ``window`` is covered: the top nodes past that point go
        top = nodes[-1]
        below = covered - (top.end - top.start)
        if below < window:
            break
        nodes.pop()
        top.swa_holders.discard(held.holder)
        tree.release(top)
        covered = below
    held.swa_covered = covered


def let_go_past(nodes: list[Node], covered: int, window: int, holder: str, num_unlisted: int = 0) -> int:
    """``_slide_window``'s release of the top nodes past the window's cover, for the runs that know no node let
    go is freed by it (vLLM+'s chunk steps): each popped and its hold by ``holder`` dropped; the cover left. The
    window keeps one node, which may be one of ``num_unlisted`` held below the list's bottom and not on it yet."""
    num_kept = 0 if num_unlisted else 1
    while len(nodes) > num_kept:
        top = nodes[-1]
        below = covered - (top.end - top.start)
        if below < window:
            break
        nodes.pop()
        top.swa_holders.discard(holder)
        covered = below
    return covered
