"""Handing a request's KV to the tree: ``[0, end)`` becomes (or joins) a path of nodes.

Positions below the request's SWA frontier arrive as tombstones (their SWA is already freed). Where the
path already exists the tree keeps its own copy and the request's duplicate is freed, except that a
tombstone the request recomputed inside its window is revived with the request's live SWA pages.
"""

from __future__ import annotations

from typing import cast

from sim.align import ceil_to
from sim.cache.components import FULL, MAMBA
from sim.cache.counted_pages import PageList
from sim.cache.matching import refresh_swa_window
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq

# Off: every insert walks on from the request's node and cuts its new KV as the general case does (the reference
# the shortcuts are held to: tests/test_page_chunks_property.py)
LEAF_SHORTCUTS = True
# True: new nodes' keys are cut from the request's tokens, whose run starts it keeps (a window-capped insert cuts
# two or three); False: from the one slice of ``[depth, end)`` first, the reference
# (tests/test_insert_keys_property.py)
KEYS_FROM_TOKENS = True


def insert(
    tree: RadixTree,
    req: RequestCache,
    end: int,
    window: int,
    has_swa: bool,
    attach: bool = True,
    touch_path: bool = False,
) -> Node:
    """Insert ``req.tokens[:end]``; returns the node ending at ``end``. The caller re-locks. ``attach``: hang
    the request's checkpoint at ``end`` on that node (else the caller does). ``touch_path``: every existing
    node the insert walks from the root gets a fresh FULL stamp, root first (SGLang's ``_touch_node``), and
    the SWA window above the node ending at ``end`` is refreshed as a match refreshes it
    (``SWAComponent.refresh_lru`` at ``INSERT_END``)."""
    page, base, last = tree.page_size, req.prefix_len, req.last_node
    if touch_path:
        for node in last.path_from_root():
            tree.touch(node, FULL)
    if LEAF_SHORTCUTS and not touch_path and not last.children and last.parent is not None:
        # nothing lies below a leaf: the walk on from it would only remember where it ended (vLLM+ inserts
        # every 32-token chunk below the one before)
        tree.hints.remember(req.tokens, last)
        path: list[Node] = []
        depth = base
    else:  # [0, prefix_len) is the request's locked path already: walk on from its end
        path, depth = tree.walk(req.tokens, end, start=last, touch=touch_path)
    full, swa = req.take_own_pages(end)
    for node in list(path):
        if node.end > base:
            lo, hi = (node.start - base) // page, (node.end - base) // page
            _merge_existing(tree, req, node, full[lo:hi], swa[lo:hi], has_swa)
    node = path[-1] if path else last
    if depth < end:
        lo = (depth - base) // page
        tokens, at = (req.tokens, depth) if KEYS_FROM_TOKENS else (req.tokens.slice(depth, end), 0)
        node = _add_new(
            tree, req, node, tokens, at, end - depth, _from(full, lo), _from(swa, lo), window, has_swa
        )
    if attach:
        attach_checkpoint(tree, req, node, end)
    if touch_path and has_swa and node is not tree.root:
        refresh_swa_window(tree, node.path_from_root(), window + page)
    req.prefix_len = end
    return node


def _merge_existing(
    tree: RadixTree, req: RequestCache, node: Node, full: PageList, swa: PageList, has_swa: bool
) -> None:
    tree.full_pool.free(full)
    frontier = req.swa_frontier
    if has_swa and node.swa_pages is None and frontier < node.end:
        if frontier > node.start:
            cut = (frontier - node.start) // tree.page_size
            free_live(tree, swa[:cut])
            tree.split(node, frontier - node.start)
            swa = swa[cut:]
        tree.revive(node, _live(swa))
    else:
        free_live(tree, swa)


def _add_new(
    tree: RadixTree,
    req: RequestCache,
    parent: Node,
    tokens: TokenSeq,
    at: int,
    key_len: int,
    full: PageList,
    swa: PageList,
    window: int,
    has_swa: bool,
) -> Node:
    """New nodes for the key ``tokens[at : at + key_len]`` below ``parent``, holding ``full`` and ``swa`` (taken:
    cut in place); each node's key is cut from ``tokens``."""
    if not has_swa:
        return tree.add_leaf(parent, tokens.slice(at, at + key_len), full, None)
    page = tree.page_size
    if LEAF_SHORTCUTS and req.swa_frontier <= parent.end and key_len <= window:  # all live, in one window
        return tree.add_leaf(parent, tokens.slice(at, at + key_len), full, _live(swa))
    dead = min(max(req.swa_frontier - parent.end, 0), key_len)
    if dead:
        free_live(tree, swa[: dead // page])
        parent = tree.add_leaf(parent, tokens.slice(at, at + dead), full[: dead // page], None)
    live = key_len - dead
    tail = ceil_to(max(window, 1), page)
    shift = 0  # pages cut off the front of ``full`` and ``swa``
    if live > tail:  # the leaf is capped at one window so a lock pins no more than it needs
        cut = (live - tail) // page
        lo = dead // page
        if lo == 0:  # the lists go to the upper node less the window's pages: at page 1, no copy of the rest
            upper_full, upper_swa, full, swa = full, swa, full[cut:], swa[cut:]
            del upper_full[cut:], upper_swa[cut:]
            shift = cut
        else:
            upper_full, upper_swa = full[lo : lo + cut], swa[lo : lo + cut]
        upper_key = tokens.slice(at + dead, at + dead + live - tail)
        parent = tree.add_leaf(parent, upper_key, upper_full, _live(upper_swa))
        dead += live - tail
    if dead == key_len:
        return parent
    lo = dead // page - shift
    return tree.add_leaf(
        parent, tokens.slice(at + dead, at + key_len), _from(full, lo), _live(_from(swa, lo))
    )


def attach_checkpoint(
    tree: RadixTree, req: RequestCache, node: Node, end: int, keep_duplicate: bool = False
) -> bool:
    """Hang the request's checkpoint at ``end`` on ``node``; True if the tree took it. Where the tree already
    holds a state there, the older copy stays (refreshed) and the request's is freed, or, with
    ``keep_duplicate``, stays the request's (``req.checkpoint`` is left set)."""
    if req.checkpoint is None or req.checkpoint[0] != end:
        return False
    state_id = req.checkpoint[1]
    if node.state is None:
        req.checkpoint = None
        tree.set_state(node, state_id)
        return True
    if not keep_duplicate:
        req.checkpoint = None
        tree.state_pool.free([state_id])
    tree.touch(node, MAMBA)
    return False


def _from(pages: PageList, index: int) -> PageList:
    """``pages[index:]``; the list itself from 0: the pages ``take_own_pages`` hands over pass to the tree
    uncopied (at page 1, a list per token)."""
    return pages if index == 0 else pages[index:]


def free_live(tree: RadixTree, swa: PageList) -> None:
    """``swa``: a run of a request's own SWA pages, whose None entries form a prefix (check_integrity)."""
    if swa and swa[-1] is not None:  # else every entry is None
        tree.swa_pool.free(cast(PageList, swa) if swa[0] is not None else [p for p in swa if p is not None])


def _live(swa: PageList) -> PageList:
    """SWA pages at or past the request's frontier: never freed, so none of them is None."""
    return cast(PageList, swa)
