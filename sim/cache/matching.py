"""The match rule (README: FULL for the whole prefix, the last W tokens of SWA, a MAMBA state at the point): where a walked path may end, and the LRU refresh of a hit."""

from __future__ import annotations

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.node import Node
from sim.cache.tree import RadixTree

# True: with both SWA and MAMBA, ``deepest_acceptable``'s climb reads a node's state first (most nodes of a
# long path hold none: a request leaves one snapshot) and no flag; False: the reference loop
# (tests/test_lean_path_loops.py)
LEAN_SCAN = True


def deepest_acceptable(path: list[Node], window: int, has_swa: bool, has_mamba: bool) -> Node | None:
    """The deepest node on ``path`` that every component accepts (the rule: ``deepest_acceptable_scan``).

    Scans up from the path's end and stops at the first acceptable node, instead of walking the whole path
    from the root on every match (FreeToken matches a request ~15 times over a path that grows with the
    run). Same answer: a run of live SWA nodes below a tombstone only gains live tokens going down, so when
    the run's deepest candidate falls short of ``window``, every node of that run does, and the search
    resumes above the tombstone (tests/test_matching_property.py compares the two).
    """
    if LEAN_SCAN and has_swa and has_mamba:
        return _deepest_with_state_and_window(path, window)
    at = len(path) - 1
    while at >= 0:
        node = path[at]
        if (has_swa and node.swa_pages is None) or (has_mamba and node.state is None):
            at -= 1
            continue
        if not has_swa:
            return node
        tombstone_at = live_window_breaks_at(path, at, window)
        if tombstone_at is None:
            return node
        at = tombstone_at - 1
    return None


def _deepest_with_state_and_window(path: list[Node], window: int) -> Node | None:
    """``deepest_acceptable`` with SWA and MAMBA: the same climb, a stateless node skipped on one read."""
    at = len(path) - 1
    while at >= 0:
        node = path[at]
        if node.state is None or node.swa_pages is None:
            at -= 1
            continue
        tombstone_at = live_window_breaks_at(path, at, window)
        if tombstone_at is None:
            return node
        at = tombstone_at - 1
    return None


def live_window_breaks_at(path: list[Node], at: int, window: int) -> int | None:
    """None when the live SWA nodes ending at ``path[at]`` hold ``window`` tokens (or reach the root with
    no tombstone: nothing below was ever freed); else the index of the tombstone that cuts them short."""
    live_run = 0
    while at >= 0:
        node = path[at]
        if node.swa_pages is None:
            return at
        live_run += node.end - node.start
        if live_run >= window:
            return None
        at -= 1
    return None


def deepest_acceptable_above(node: Node, window: int, has_swa: bool, has_mamba: bool) -> Node | None:
    """``deepest_acceptable(node.path_from_root(), ...)``, climbing the parent links instead of a list (a match
    that knows where its walk ends: FreeToken's re-match after a commit)."""
    if LEAN_SCAN and has_swa and has_mamba:
        return _deepest_above_with_state_and_window(node, window)
    while node.parent is not None:
        if (has_swa and node.swa_pages is None) or (has_mamba and node.state is None):
            node = node.parent
            continue
        if not has_swa:
            return node
        live_run, up = 0, node  # live_window_breaks_at, up the links
        while up.parent is not None and up.swa_pages is not None:
            live_run += up.end - up.start
            if live_run >= window:
                return node
            up = up.parent
        if up.parent is None:  # the root reached with no tombstone
            return node
        node = up.parent  # above the tombstone that cut the run short
    return None


def _deepest_above_with_state_and_window(node: Node, window: int) -> Node | None:
    """``deepest_acceptable_above`` with SWA and MAMBA: a stateless node skipped on one read, no flag."""
    while node.parent is not None:
        if node.state is None or node.swa_pages is None:
            node = node.parent
            continue
        live_run, up = 0, node
        while up.parent is not None and up.swa_pages is not None:
            live_run += up.end - up.start
            if live_run >= window:
                return node
            up = up.parent
        if up.parent is None:
            return node
        node = up.parent
    return None


def deepest_acceptable_scan(path: list[Node], window: int, has_swa: bool, has_mamba: bool) -> Node | None:
    """The rule, root first (the reference ``deepest_acceptable`` is proven equal to).

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
