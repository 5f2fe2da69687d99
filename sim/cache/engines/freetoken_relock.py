"""FreeToken's snapshot commit: the request's relock and its re-match's stamps in one climb up its path.

A GDN snapshot's commit (``commit_snapshot``) inserts the prompt, moves the request's locks down to the node the
insert ends on (``relock``: FULL locks from there up to the old node, ~230 nodes a request late in a long run)
and re-matches it (``rematch``: SWA's ``stamp_path`` from the deepest acceptable node, that node or just above
it, to the root): two climbs over the same nodes. Nothing between them reads a lock or a stamp: the old window
and state are released first either way (a release pushes a leaf at its stamp), the match's scan reads only
pages and states, the leaf heap's push no lock. So one climb writes both (the re-match's tick and leaf push
come before the locks instead of after). The reference, the two passes, stays behind ``FUSE_RELOCK_STAMP``
(tests/test_freetoken_relock_property.py).

A finish then releases the request (``unlock``: ~235 nodes) and the finish trim re-matches the prompt
(``stamp_path``: ~234, the same path less the output's nodes). Between them only the trim's walks (a split
copies a node's lock count to its upper half, so a lift after it lifts both), its climb and its tombstones run,
none reading a FULL lock or the unlocked count. So the release lifts only the request's own node's lock (whose
release may push it as a leaf, in its place) and the trim's re-match lifts the rest as it stamps
(``unlock_and_stamp``; ``FUSE_UNLOCK_STAMP``, ``LockSet.defers_path``).
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
# True: a finished request's release leaves its path's FULL locks to the finish trim's re-match, which lifts them
# as it stamps (``unlock_and_stamp``); False: the reference, ``unlock`` then ``stamp_path``
FUSE_UNLOCK_STAMP = True


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


def unlock_path(tree: RadixTree, node: Node) -> None:
    """The FULL locks a release left (``LockSet.path_left``), from ``node`` up to the root, lifted."""
    num_unlocked = 0
    while node.parent is not None:
        num_holders = node.full_lock - 1
        node.full_lock = num_holders
        if num_holders == 0:
            num_unlocked += node.end - node.start
        node = node.parent
    tree.num_unlocked_tokens += num_unlocked


def unlock_and_stamp(tree: RadixTree, node: Node, best: Node, stamp: int) -> None:
    """``unlock_path(node)`` and ``clock.stamp_from(best, stamp, 0)`` in one climb: ``node`` and ``best`` lie
    on one path from the root, where the deeper node ends further."""
    while best.end > node.end:  # ``best`` below ``node``: the stamp only
        best.full_stamp = stamp
        stamp -= 1
        best = best.parent
    num_unlocked = 0
    while node.end > best.end:  # ``node`` below ``best``: the unlock only
        num_holders = node.full_lock - 1
        node.full_lock = num_holders
        if num_holders == 0:
            num_unlocked += node.end - node.start
        node = node.parent
    while node.parent is not None:  # from ``best`` (now ``node``) up: both
        num_holders = node.full_lock - 1
        node.full_lock = num_holders
        if num_holders == 0:
            num_unlocked += node.end - node.start
        node.full_stamp = stamp
        stamp -= 1
        node = node.parent
    tree.num_unlocked_tokens += num_unlocked
