"""Locks that keep a running request's cached prefix from being evicted under it.

FULL: every node from ``last_node`` up to the root. SWA: live nodes from ``last_node`` upward until a
window's worth of tokens is covered (tombstones skipped). MAMBA: the state the request resumed from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.cache.node import Node
from sim.cache.tree import RadixTree


@dataclass
class LockSet:
    holder: str
    node: Node  # the FULL lock runs from here to the root
    swa_nodes: list[Node] = field(default_factory=list)
    state_node: Node | None = None


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
    current = node
    while current is not stop:
        if current.full_lock == 0:
            tree.num_unlocked_tokens -= current.end - current.start
        current.full_lock += 1
        current = current.parent
    _lock_window_and_state(held, node, tree, window, has_swa, has_mamba)
    return held


def _lock_window_and_state(
    held: LockSet, node: Node, tree: RadixTree, window: int, has_swa: bool, has_mamba: bool
) -> None:
    holder = held.holder
    covered, current = 0, node
    while has_swa and current is not tree.root and covered < window:
        if current.swa_pages is not None:
            current.swa_holders.add(holder)
            held.swa_nodes.append(current)
            covered += current.end - current.start
        current = current.parent
    if has_mamba and node.state is not None:
        node.state_lock += 1
        held.state_node = node


def unlock(tree: RadixTree, held: LockSet, keep_from: Node | None = None) -> None:
    """Release ``held``; ``keep_from``: the FULL locks from this node up stay (the holder's new path)."""
    current = held.node
    stop = tree.root if keep_from is None else keep_from
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
