"""Run nodes: a chain of nodes that no rule tells apart, kept as one node whose ``cuts`` are their ends.

Late in a long ``freetoken-budget`` replay a prompt's path holds ~230 nodes of ~2 tokens in 2 to 4 runs: each
node but the deepest has one child, and neighbours agree in all that FreeToken's passes read (live or
tombstone, FULL lock, no window holder, no state, stamps one step apart: ``stamp_path``'s base - depth or the
revive's consecutive ticks). The cuts are outputs (a match, the window lock, the SWA and state scans and the
eviction cascade read them, and FreeToken's own tree keeps them), so a run keeps them: a *piece* of a run node
is a node of the per-node tree, with the run's fields, its own span, its pages a slice of the run's lists and
the stamp ``full_stamp - (pieces below it) * stamp_step``. Only FreeToken's SWA rules make runs (``compact``,
at each finish, along the finished prompt's path); a rule that would read inside a run first makes the piece a
node again (``surface``: what a split made it, no new cut). The passes that write a whole path (locks, stamps,
revives, tombstones) then take a step a run. Switch: ``RUN_NODES`` (off: the per-node tree, the reference;
tests/test_run_nodes_property.py holds every output equal).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable, Protocol, cast

from sim.cache.events import EventBus, Split, emit
from sim.cache.node import Node
from sim.cache.page_cuts import cut_pages

RUN_NODES = True


class RadixTree(Protocol):
    """What of ``tree.RadixTree`` a run reads (``tree`` imports this module: no cycle)."""

    page_size: int
    owns_page_lists: bool
    events: EventBus
    on_split: Callable[[Node, Node], None] | None
    merge_check: Callable[[Node, Node], bool] | None
    on_absorbed: Callable[[Node], None] | None


def surface(tree: RadixTree, node: Node, pos: int) -> Node:
    """Make ``pos`` (one of ``node.cuts``) a node end again: the pieces above it become a new node above
    ``node``, as the per-node tree holds them. Told as a split (the lock sets of a window holding the run name
    the new node, the why watcher copies a tombstone's cause)."""
    cuts = node.cuts
    assert cuts is not None
    at = bisect_left(cuts, pos)
    offset = pos - node.start
    cut, owned = offset // tree.page_size, tree.owns_page_lists
    full_head, full_tail = cut_pages(node.full_pages, cut, owned)
    swa = node.swa_pages
    swa_head, swa_tail = (None, None) if swa is None else cut_pages(swa, cut, owned)
    upper = Node(node.key.slice(0, offset), node.start, node.parent, full_head, swa_head)
    upper.edge = node.edge
    node.parent.children[upper.edge] = upper
    node.key, node.start, node.parent = node.key.slice(offset), pos, upper
    node.full_pages, node.swa_pages = full_tail, swa_tail
    node.edge = node.key.first_page(tree.page_size)
    upper.children[node.edge] = node
    upper.full_lock, upper.full_stamp = node.full_lock, node.full_stamp - (len(cuts) - at) * node.stamp_step
    upper.swa_stamp = node.swa_stamp
    if at == len(cuts) - 1:  # the last cut (the cascade takes a run's pieces bottom up): the list goes up
        cuts.pop()
        upper.cuts, node.cuts = (cuts if cuts else None), None
    else:
        upper.cuts, node.cuts = (cuts[:at] if at else None), cuts[at + 1 :]
    upper.stamp_step = node.stamp_step
    if node.swa_holders:  # a window holds the whole run: its holders' lock sets name the new node too
        upper.swa_holders = set(node.swa_holders)
        if tree.on_split is not None:
            tree.on_split(upper, node)
    channel = tree.events.channel(Split)
    if channel:
        emit(channel, Split(upper, node))
    return upper


def around(tree: RadixTree, node: Node, pos: int) -> list[Node]:
    """``node`` (a run, ``start < pos < end``) cut at its cuts so that ``pos`` is a node end or lies inside a
    node of one piece: the nodes now in its place, top first."""
    cuts = node.cuts
    assert cuts is not None
    at = bisect_left(cuts, pos)
    if at < len(cuts) and cuts[at] == pos:
        return [surface(tree, node, pos), node]
    out = [node]
    holder = node
    if at < len(cuts):
        holder = surface(tree, node, cuts[at])
        out.insert(0, holder)
    if at > 0:
        out.insert(0, surface(tree, holder, cuts[at - 1]))
    return out


def pieces_between(top: Node, node: Node) -> list[Node]:
    """The nodes strictly between ``top`` and its descendant ``node``, top first: a split of a run (``around``)
    surfaces the pieces above the cut between the run's parent and the half it returns, and a walk lists them."""
    out: list[Node] = []
    node = node.parent
    while node is not top:
        out.append(node)
        node = node.parent
    out.reverse()
    return out


def piece_at(tree: RadixTree, node: Node, start: int) -> Node:
    """The piece of ``node``'s run that starts at ``start``, made a node (an SWA scan's entry, taken): the node
    holding it now is ``node`` or one made above it since (surfacing keeps a run's bottom in its node)."""
    while node.start > start:
        node = node.parent
    if node.cuts is None:
        return node
    if node.start < start:
        surface(tree, node, start)
    cuts = node.cuts
    return node if cuts is None else surface(tree, node, cuts[0])


def compact(tree: RadixTree, node: Node) -> None:
    """Join each stretch of alike nodes on ``node``'s path to the root into its deepest node."""
    while node.parent is not None and node.parent.parent is not None:
        upper = node.parent
        step = _step(tree, upper, node)
        if step is None:
            node = upper
            continue
        stretch = [node, upper]
        while upper.parent.parent is not None and _step(tree, upper.parent, upper) == step:
            upper = upper.parent
            stretch.append(upper)
        _join(tree, stretch, step)
        node = node.parent


def _step(tree: RadixTree, upper: Node, lower: Node) -> int | None:
    """The stamp step between ``upper`` and its child ``lower`` if the two can be one run, else None."""
    if len(upper.children) != 1 or upper.state is not None or upper.swa_holders or lower.swa_holders:
        return None
    if (upper.swa_pages is None) != (lower.swa_pages is None) or upper.full_lock != lower.full_lock:
        return None
    top = lower.full_stamp if lower.cuts is None else lower.full_stamp - len(lower.cuts) * lower.stamp_step
    step = top - upper.full_stamp
    if (upper.cuts is not None and upper.stamp_step != step) or (
        lower.cuts is not None and lower.stamp_step != step
    ):
        return None
    check = tree.merge_check
    if check is not None and not check(upper, lower):
        return None
    return step


def _join(tree: RadixTree, stretch: list[Node], step: int) -> None:
    """``stretch`` (deepest first) made one node, the deepest: the lists of the top one extended."""
    top, bottom = stretch[-1], stretch[0]
    full, swa, key = cast("list[int]", top.full_pages), cast("list[int] | None", top.swa_pages), top.key
    cuts = top.cuts if top.cuts is not None else []
    for index in range(len(stretch) - 2, -1, -1):
        node = stretch[index]
        full.extend(cast("list[int]", node.full_pages))
        if swa is not None:
            swa.extend(node.swa_pages)  # type: ignore[arg-type]  # alike: both live
        cuts.append(node.start)
        if node.cuts is not None:
            cuts.extend(node.cuts)
        key = key + node.key
    bottom.key, bottom.start, bottom.full_pages, bottom.swa_pages = key, top.start, full, swa
    bottom.cuts, bottom.stamp_step = cuts, step
    bottom.edge, bottom.parent = top.edge, top.parent
    top.parent.children[top.edge] = bottom
    absorbed = tree.on_absorbed
    for node in stretch[1:]:
        node.alive = False
        node.children = {}
        if absorbed is not None:
            absorbed(node)
