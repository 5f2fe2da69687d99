"""FreeToken's SWA insert: ``SWARadixCache.insert``, on our tree (``HybridRadixCache.insert``: ``freetoken_gdn``).

SWA: a matched tombstone the request recomputed in its window is revived (whole, or its tail past the
request's frontier), unless a reader still holds its path; the new suffix is one tombstone node below the
frontier (never the whole suffix: the last page stays live) and one live node, not cut at a window. New and
revived nodes get a fresh tick.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter
from typing import cast

from sim.cache.components import FULL
from sim.cache.engines.freetoken_frees import PoolFrees
from sim.cache.engines.freetoken_links import walk_from_live
from sim.cache.engines.freetoken_tree import EVENT_STRIDE, FreeTokenClock, tick_pieces
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree
from sim.cache.tree_runs import around

# False: every walked node through the reference steps (``swa_live`` on its slice, ``_revive``); the property
# test holds the inline loop to it (tests/test_freetoken_path_runs.py)
INLINE_RECONCILE = True
# False: the reference slices, a copy of the request's lists per part; True: the insert's suffix keeps the
# request's own lists, cut in place (at page 1 a list per token: each copy of it, and the copied list's death,
# touches every id again) (tests/test_freetoken_page_lists.py)
LISTS_IN_PLACE = True
# False: the inline loop over every walked node, its page cuts listed first; True: the FULL copies joined
# straight from the nodes, and the SWA pass starts where the request's live SWA begins (about half of a
# recomputed path lies below its frontier, where nothing is revived) (tests/test_freetoken_frontier_pass.py)
PASS_FROM_FRONTIER = True
# True: past the node that holds the frontier (the only one a revive may split) the revives run with the clock's
# tick in a local, each span starting where the last ended; False: the reference loop
# (tests/test_lean_path_loops.py)
LOCAL_TICKS = True
# True: where the FULL frees are counted, the walk's path listed only from where the SWA pass reads it
# (``freetoken_links.walk_from_live``); False: the whole path (tests/test_freetoken_links_property.py)
CLIMB_TO_LIVE = True


def insert_swa(
    tree: RadixTree, req: RequestCache, end: int, clock: FreeTokenClock, has_swa: bool = True
) -> Node:
    """``SWARadixCache.insert`` of ``[0, end)``; without SWA (a FULL-only model) no node is a tombstone. The
    duplicates it frees go to the pools at the end, together (``PoolFrees``)."""
    page, base = tree.page_size, req.prefix_len
    taken = req.take_own_pages(end)  # lists: FreeToken's trees own theirs, so none is counted
    full, swa = cast("list[int]", taken[0]), cast("list[int | None]", taken[1])
    frees = PoolFrees(tree)
    if CLIMB_TO_LIVE and PASS_FROM_FRONTIER and has_swa and frees.full_counted:
        path, node, depth = walk_from_live(tree, req, end, swa, frees)  # counts the FULL frees
        if path:
            _reconcile_from_frontier(tree, req.swa_frontier, path, base, swa, clock, frees)
    else:
        path, depth = tree.walk(req.tokens, end, start=req.last_node)
        if path and PASS_FROM_FRONTIER:
            frees.full_path(full, path, base)  # the tree's copy stays; the request's goes
            if has_swa:
                _reconcile_from_frontier(tree, req.swa_frontier, path, base, swa, clock, frees)
        elif path:
            # page indices into full / swa of each walked node's span, taken before a revive splits a node
            cuts = [(node.start - base) // page for node in path]
            cuts.append((path[-1].end - base) // page)
            frees.full_spans(full, cuts)  # the tree's copy stays; the request's goes
            if has_swa:
                _reconcile_swa(tree, req.swa_frontier, path, cuts, swa, clock, frees)
        node = path[-1] if path else req.last_node
    if depth < end:
        lo = (depth - base) // page
        if LISTS_IN_PLACE:  # the walked spans are copied out above: the lists are the suffix's
            del full[:lo], swa[:lo]
            suffix_full, suffix_swa = full, swa if has_swa else None
        else:
            suffix_full, suffix_swa = full[lo:], swa[lo:] if has_swa else None
        node = _add_suffix(tree, req, node, depth, end, suffix_full, suffix_swa, clock, frees)
    frees.flush()
    req.prefix_len = end
    return node


def _reconcile_swa(
    tree: RadixTree,
    frontier: int,
    path: list[Node],
    cuts: list[int],
    swa: list,
    clock: FreeTokenClock,
    frees: PoolFrees,
) -> None:
    """Each walked node's SWA: a tombstone the request recomputed takes the request's copy, anything else
    leaves the request's copy to be freed. Late in a run the path holds a hundred nodes and more, most of
    them revived (``_revive``'s work, inline where no split is needed), so the loop is kept tight."""
    if not INLINE_RECONCILE:
        for i, node in enumerate(path):
            if node.swa_pages is not None or node.full_lock > 0 or frontier >= node.end:
                frees.swa_live(swa[cuts[i] : cuts[i + 1]])
            else:
                _revive(tree, node, swa[cuts[i] : cuts[i + 1]], frontier, clock, frees)
        return
    leaves, num_revived = clock.leaves, 0
    for i, node in enumerate(path):
        hi = cuts[i + 1]
        if node.swa_pages is not None or node.full_lock > 0 or frontier >= node.end:
            # swa_live's own test before the slice: the request's freed entries (None) form a prefix
            if swa[hi - 1] is not None:
                frees.swa_live(swa[cuts[i] : hi])
        elif frontier > node.start:
            _revive(tree, node, swa[cuts[i] : hi], frontier, clock, frees)
        else:  # tree.revive(node, pages, stamp=False), then clock.stamp_new(node)
            node.swa_pages = swa[cuts[i] : hi]
            num_revived += hi - cuts[i]
            clock.events += 1
            node.full_stamp = stamp = clock.events * EVENT_STRIDE
            if not node.children:
                leaves.push(FULL, node, stamp)
    tree.num_swa_pages += num_revived


def _reconcile_from_frontier(
    tree: RadixTree,
    frontier: int,
    path: list[Node],
    base: int,
    swa: list,
    clock: FreeTokenClock,
    frees: PoolFrees,
) -> None:
    """``_reconcile_swa``'s inline loop, from where it can do anything. A node ending at or below ``frontier``
    takes its first branch, which frees only where the request's copy ends live; the request's freed entries
    (None) are a prefix of ``swa``, so those nodes are the last ones below the frontier, found by climbing
    back from it until an entry is None. Each span's page indices are read before its node is revived (a
    revive's split moves the node's start; nodes below it are not touched yet)."""
    page = tree.page_size
    below = bisect_right(path, frontier, key=attrgetter("end"))  # path[:below] ends at or below frontier
    if below < len(path) and path[below].cuts is not None and path[below].start < frontier:
        path[below : below + 1] = around(tree, path[below], frontier)  # the frontier's piece made a node
        below = bisect_right(path, frontier, key=attrgetter("end"))
    live_from = below
    while live_from > 0 and swa[(path[live_from - 1].end - base) // page - 1] is not None:
        live_from -= 1
    for node in path[live_from:below]:
        frees.swa_live_span(swa, (node.start - base) // page, (node.end - base) // page)
    if LOCAL_TICKS and below < len(path):
        _reconcile_nodes(tree, frontier, path[below : below + 1], base, swa, clock, frees)
        _revive_below(tree, path, below + 1, base, swa, clock, frees)
    else:
        _reconcile_nodes(tree, frontier, path[below:], base, swa, clock, frees)


def _reconcile_nodes(
    tree: RadixTree, frontier: int, nodes: list, base: int, swa: list, clock: FreeTokenClock, frees: PoolFrees
) -> None:
    """The reference loop over the nodes ending past the frontier."""
    page = tree.page_size
    leaves, num_revived = clock.leaves, 0
    for node in nodes:
        lo, hi = (node.start - base) // page, (node.end - base) // page
        if node.swa_pages is not None or node.full_lock > 0:
            if swa[hi - 1] is not None:
                frees.swa_live_span(swa, lo, hi)
        elif frontier > node.start:
            _revive(tree, node, swa[lo:hi], frontier, clock, frees)
        else:  # tree.revive(node, pages, stamp=False), then clock.stamp_new(node)
            node.swa_pages = swa[lo:hi]
            num_revived += hi - lo
            clock.events = tick_pieces(node, clock.events)
            node.full_stamp = stamp = clock.events * EVENT_STRIDE
            if not node.children:
                leaves.push(FULL, node, stamp)
    tree.num_swa_pages += num_revived


def _revive_below(
    tree: RadixTree, path: list[Node], at: int, base: int, swa: list, clock: FreeTokenClock, frees: PoolFrees
) -> None:
    """``_reconcile_nodes`` over ``path[at:]``, all starting past the frontier (no split): a path's nodes are
    contiguous, so each span starts where the last ended, and nothing reads the clock's tick in between."""
    page = tree.page_size
    leaves, num_revived, events = clock.leaves, 0, clock.events
    lo = (path[at - 1].end - base) // page
    for node in path[at:]:
        hi = (node.end - base) // page
        if node.swa_pages is not None or node.full_lock > 0:
            if swa[hi - 1] is not None:
                frees.swa_live_span(swa, lo, hi)
        else:
            node.swa_pages = swa[lo:hi]
            num_revived += hi - lo
            events = events + 1 if node.cuts is None else tick_pieces(node, events)
            node.full_stamp = stamp = events * EVENT_STRIDE
            if not node.children:
                leaves.push(FULL, node, stamp)
        lo = hi
    clock.events = events
    tree.num_swa_pages += num_revived


def _revive(
    tree: RadixTree, node: Node, swa: list, frontier: int, clock: FreeTokenClock, frees: PoolFrees
) -> None:
    """A tombstone, unlocked, that the request recomputed past its SWA frontier: it adopts the request's live
    copy (elsewhere the request's copy of a span the tree holds is freed)."""
    if frontier > node.start:  # the head stays a tombstone; the tail past the frontier is revived
        cut = (frontier - node.start) // tree.page_size
        frees.swa_live(swa[:cut])
        tree.split(node, frontier - node.start)
        swa = swa[cut:]
    tree.revive(node, swa, stamp=False)  # no SWA stamp: FreeToken's one timestamp, the FULL one, is new
    clock.stamp_new(node)


def _add_suffix(
    tree: RadixTree,
    req: RequestCache,
    parent: Node,
    depth: int,
    end: int,
    full: list,
    swa: list | None,
    clock: FreeTokenClock,
    frees: PoolFrees,
) -> Node:
    page = tree.page_size
    dead = max(0, min(req.swa_frontier, end) - depth) if swa is not None else 0
    dead = min(dead, max(0, end - depth - page))
    if dead and swa is not None and LISTS_IN_PLACE:
        # the tombstone keeps ``full``'s head (most of a recomputed suffix: all but the window) in place, and
        # the freed head of ``swa`` (None but for its end, which swa_live's own test reads) is not copied
        cut = dead // page
        if swa[cut - 1] is not None:
            frees.swa_live_span(swa, 0, cut)
        live_full, live_swa = full[cut:], swa[cut:]
        del full[cut:]
        parent = tree.add_leaf(parent, req.tokens.slice(depth, depth + dead), full, None)
        clock.stamp_new(parent)
        full, swa = live_full, live_swa
    elif dead and swa is not None:  # (dead is 0 without SWA)
        cut = dead // page
        frees.swa_live(swa[:cut])
        parent = tree.add_leaf(parent, req.tokens.slice(depth, depth + dead), full[:cut], None)
        clock.stamp_new(parent)
        full, swa = full[cut:], swa[cut:]
    node = tree.add_leaf(parent, req.tokens.slice(depth + dead, end), full, swa)
    clock.stamp_new(node)
    return node
