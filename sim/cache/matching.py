"""The match rule (README: FULL for the whole prefix, the last W tokens of SWA, a MAMBA state at the point): where a walked path may end, and the LRU refresh of a hit."""

from __future__ import annotations

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.node import Node
from sim.cache.tree import RadixTree


def deepest_acceptable(path: list[Node], window: int, has_swa: bool, has_mamba: bool) -> Node | None:
    """The deepest node on ``path`` that every component accepts.

    FULL is present on every tree node. MAMBA needs a state at the node's end. SWA needs ``window`` live
    tokens ending at the node, counted from the last tombstone above it (a path with no tombstone from the
    root always passes: nothing below it was ever freed).
    """
    best = None
    live_run = float("inf")
    for node in path:
        ok = True
        if has_swa:
            if node.swa_pages is None:
                live_run, ok = 0.0, False
            else:
                live_run += node.end - node.start
                ok = live_run >= window
        if has_mamba and node.state is None:
            ok = False
        if ok:
            best = node
    return best


def refresh_after_match(tree: RadixTree, path: list[Node], end: Node, window: int, swa_refresh: str) -> None:
    """FULL: the matched path, ancestors older. SWA: the window above the end (SGLang) or the whole
    path (FreeToken). MAMBA: the end node only: ancestors' states are not what the hit used."""
    used = path[: path.index(end) + 1] if end in path else []
    for node in used:
        tree.touch(node, FULL)
    if swa_refresh == "path":
        for node in used:
            if node.swa_pages is not None:
                tree.touch(node, SWA)
    else:
        refresh_swa_window(tree, used, window + tree.page_size)
    if end.state is not None and used:
        tree.touch(end, MAMBA)


def refresh_swa_window(tree: RadixTree, path: list[Node], span: int) -> None:
    """SGLang's ``reset_node_and_window_ancestors_mru`` (a match's end, and an insert's): the path's last
    node and the ancestors that start within ``span`` tokens of its end (every node's length counts, a
    tombstone's too) are SWA-stamped, the end newest."""
    picked, covered = [], 0
    for node in reversed(path):
        if covered >= span:
            break
        if node.swa_pages is not None:
            picked.append(node)
        covered += node.end - node.start
    for node in reversed(picked):
        tree.touch(node, SWA)
