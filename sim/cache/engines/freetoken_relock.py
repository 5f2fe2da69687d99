"""FreeToken's snapshot commit: the request's relock and its re-match's stamps in one climb up its path.

A GDN snapshot's commit (``commit_snapshot``) inserts the prompt, moves the request's locks down to the node the
insert ends on (``relock``: FULL locks from there up to the old node, ~230 nodes a request late in a long run)
and re-matches it (``rematch``: SWA's ``stamp_path`` from the deepest acceptable node, that node or just above
it, to the root): two climbs over the same nodes. Nothing between them reads a lock or a stamp: the old window
and state are released first either way (a release pushes a leaf at its stamp), the match's scan reads only
pages and states, the leaf heap's push no lock. So one climb writes both (the re-match's tick and leaf push
come before the locks instead of after). The reference, the two passes, stays behind ``FUSE_RELOCK_STAMP``
(tests/test_freetoken_relock_property.py).
"""

from __future__ import annotations

from sim.cache import locks
from sim.cache.engines.freetoken_tree import FreeTokenClock
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree

# True: a snapshot commit's relock and re-match stamps in one climb; False: the reference, ``relock`` then
# ``rematch``'s ``stamp_path``
FUSE_RELOCK_STAMP = True


def relock_and_stamp(
    tree: RadixTree,
    req: RequestCache,
    node: Node,
    best: Node,
    clock: FreeTokenClock,
    window: int,
    has_swa: bool,
    has_mamba: bool,
) -> None:
    """``relock(req, node)`` (no slide) then ``clock.stamp_path(best)``; ``best`` is ``node`` or above it."""
    old = req.locks
    locks.unlock(tree, old, keep_from=old.node)  # the old window and state, before any stamp
    stamp = clock.begin_path(best)
    lock_and_stamp(tree, node, old.node, best, stamp)
    held = locks.LockSet(req.request_id, node)
    locks._lock_window_and_state(held, node, tree, window, has_swa, has_mamba)
    req.locks = held


def lock_and_stamp(tree: RadixTree, node: Node, stop: Node, best: Node, stamp: int) -> None:
    """``locks._lock_path(node, stop)`` and ``clock.stamp_from(best, stamp, 0)`` in one climb from ``node``:
    ``stop`` and ``best`` both lie on its path to the root, either one above the other."""
    num_locked = 0  # tokens of the nodes this lock is the first on
    while node is not stop and node is not best:  # below both: the lock only
        num_holders = node.full_lock
        if num_holders == 0:
            num_locked += node.end - node.start
        node.full_lock = num_holders + 1
        node = node.parent
    if node is best:
        while node is not stop:  # from ``best`` up to ``stop``: both
            num_holders = node.full_lock
            if num_holders == 0:
                num_locked += node.end - node.start
            node.full_lock = num_holders + 1
            node.full_stamp = stamp
            stamp -= 1
            node = node.parent
    else:
        while node is not best:  # ``best`` lies above ``stop``: the nodes between get neither
            node = node.parent
    tree.num_unlocked_tokens -= num_locked
    while node.parent is not None:  # above both: the stamp only
        node.full_stamp = stamp
        stamp -= 1
        node = node.parent
