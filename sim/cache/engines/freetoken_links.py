"""FreeToken's matches and finish trim up the parent links, where only a walk's end is wanted.

Late in a long run a request's path holds ~230 nodes (cuts collect on the shared heads: Round 13), and the
admission match and the finish trim each listed the whole path (``RadixTree.walk`` climbs from the
remembered node to the root, appending) only to read it again from its end: ``deepest_acceptable`` stops
near the end, the trim's doomed list reads every node once. Here the walk starts at the remembered node
itself (``walk_end``: ``RadixTree.descend``, the same hint, no list), and the trim's one climb up the links
takes both the nodes it tombstones and the deepest acceptable node. An insert whose FULL frees are only
counted lists its walk's path only from where its SWA pass reads it (``walk_from_live``). The references,
the list-making steps, stay behind ``freetoken_swa.MATCH_UP_LINKS``, ``freetoken_swa.TRIM_UP_LINKS`` and
``freetoken_insert.CLIMB_TO_LIVE`` (tests/test_freetoken_links_property.py).
"""

from __future__ import annotations

from sim.cache.engines.freetoken_frees import PoolFrees
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq


def walk_end(tree: RadixTree, key: TokenSeq, end: int) -> tuple[Node, int]:
    """``tree.walk(key, end)`` from the root, as the node it ends on (the root if none) and its FULL depth:
    the remembered node is on ``key``'s path, so the descent from it is the walk's after its climb to it."""
    end = min(end, len(key))
    known = tree.hints.deepest_known(key, end)
    start = known if known is not None else tree.root
    below, depth = tree.descend(key, end, start, [])
    return (below[-1] if below else start), depth


def trim_climb(node: Node, window: int, has_mamba: bool) -> tuple[list[Node], Node | None]:
    """One climb from ``node`` (the trim's walk's end) to the root: the nodes ``tombstone_head`` takes (live,
    held by no window, with a child), top first, and ``deepest_acceptable`` of the path with SWA. A
    candidate's window counts from it upward, so the deepest candidate of a live run decides the run: it is
    taken when the run holds ``window`` tokens from it, or reaches the root; a tombstone ends the run."""
    doomed: list[Node] = []
    # the deepest candidate of the live run climbed (``is_open``), its tokens up to here; a Node throughout, not
    # ``Node | None``, for mypyc
    candidate, is_open, found, num_live = node, False, False, 0
    while node.parent is not None and not found:
        if node.swa_pages is None:
            is_open = False
        else:
            if not node.swa_holders and node.children:
                doomed.append(node)
            if not is_open and (not has_mamba or node.state is not None):
                candidate, is_open, num_live = node, True, 0
            if is_open:
                num_live += node.end - node.start
                found = num_live >= window
        node = node.parent
    while node.parent is not None:
        if node.swa_pages is not None and not node.swa_holders and node.children:
            doomed.append(node)
        node = node.parent
    doomed.reverse()
    return doomed, candidate if is_open else None  # found, or the root reached by an open run


def walk_from_live(
    tree: RadixTree, req: RequestCache, end: int, swa: list, frees: PoolFrees
) -> tuple[list[Node], Node, int]:
    """``tree.walk(req.tokens, end, start=req.last_node)`` for an insert whose FULL frees are counted (their
    count needs only the walk's ends, counted here): the nodes ending past the SWA frontier and, above them,
    those whose span of ``swa`` ends live, which are all ``_reconcile_from_frontier`` reads of the path; the
    walk's end node; its FULL depth. Above the first node ending at or below the frontier with a freed end,
    nothing is listed (``swa``'s freed entries are a prefix: the SWA pass stops climbing there)."""
    key, start = req.tokens, req.last_node
    end = min(end, len(key))
    known = tree.hints.deepest_known(key, end)
    top = known if known is not None and known.end > start.end else start  # ``climb``: the one below start
    below, depth = tree.descend(key, end, top, [])
    last = below[-1] if below else top
    if last is not start:  # ``PoolFrees.full_path``'s count: the walked spans are consecutive
        page, base = tree.page_size, req.prefix_len
        frees.num_full += (last.end - base) // page - (start.end - base) // page
    frontier, page, base = req.swa_frontier, tree.page_size, req.prefix_len
    above: list[Node] = []
    node = top
    while node is not start and (node.end > frontier or swa[(node.end - base) // page - 1] is not None):
        above.append(node)
        node = node.parent
    above.reverse()
    return above + below, last, depth
