"""The why watcher's blocked ranges of a match (``TreeMissTracker.classify``): along a list of the match's
path (``blocked_on_path``, the reference), or up the parent links from its deepest node
(``blocked_by_links``).

The list costs a climb of the whole path to make (the walk hints' ``climb``), then each scan reads it from
its end. Late in a run a path holds two hundred nodes and more, and where the matches keep none of them
(``freetoken-budget``'s: no state on the path, nothing cached) every scan read all of it. Up the links no
list is made: each climb starts at the deepest node and stops where its answer is, the nodes the list's scans
read from its end, in the same order; where no state was ever evicted there is nothing to look for past the
states. Switch ``misses.BLOCKED_BY_LINKS``; tests/test_misses_links_property.py holds the two to each other.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter

from sim.cache.node import Node
from sim.cache.reasons import BLOCKED_OTHER, MAMBA_STATE, SWA_TRIGGER, Range


def blocked_on_path(
    path: list[Node],
    cached: int,
    full_depth: int,
    has_swa: bool,
    has_mamba: bool,
    tomb_cause: dict[Node, str],
    state_evicted: dict[Node, str],
) -> tuple[Range, ...]:
    """The deepest point past ``cached`` that meets the MAMBA rule failed on SWA (its tombstone's cause);
    past it, no MAMBA state (or an evicted one) is why. ``path``: from below the root to the match's end."""
    first = bisect_right(path, cached, key=attrgetter("end"))  # path[first:] ends past ``cached``
    at = len(path) - 1  # the deepest with a state (any: no MAMBA)
    while has_mamba and at >= first and path[at].state is None:
        at -= 1
    ranges: list[Range] = []
    start = cached
    if at >= first:
        cause = _swa_cause_on_path(path, at, tomb_cause) if has_swa else BLOCKED_OTHER
        ranges.append((cached, path[at].end, cause))
        start = path[at].end
    if start < full_depth:
        ranges += _stateless_on_path(path, start, full_depth, state_evicted)
    return tuple(ranges)


def _swa_cause_on_path(path: list[Node], at: int, tomb_cause: dict[Node, str]) -> str:
    """The cause of the deepest tombstone at or above ``path[at]``: it cut the window short."""
    while at >= 0 and path[at].swa_pages is not None:
        at -= 1
    return tomb_cause.get(path[at], SWA_TRIGGER) if at >= 0 else BLOCKED_OTHER


def _stateless_on_path(
    path: list[Node], start: int, full_depth: int, state_evicted: dict[Node, str]
) -> list[Range]:
    at = len(path) - 1  # the deepest node past ``start`` whose state was evicted, if any (ends rise)
    while at >= 0 and path[at].end > start and path[at] not in state_evicted:
        at -= 1
    if at < 0 or path[at].end <= start:
        return [(start, full_depth, MAMBA_STATE)]
    last = path[at]
    ranges = [(start, last.end, state_evicted[last])]
    return ranges + ([(last.end, full_depth, MAMBA_STATE)] if last.end < full_depth else [])


def blocked_by_links(
    last: Node,
    cached: int,
    full_depth: int,
    has_swa: bool,
    has_mamba: bool,
    tomb_cause: dict[Node, str],
    state_evicted: dict[Node, str],
) -> tuple[Range, ...]:
    """``blocked_on_path(last.path_from_root(), ...)``. Every climb stops at the root at the latest: it ends
    at 0, at or above ``cached``, and has no parent."""
    at = last
    while has_mamba and at.end > cached and at.state is None:
        at = at.parent
    ranges: list[Range] = []
    start = cached
    if at.end > cached:
        cause = _swa_cause_above(at, tomb_cause) if has_swa else BLOCKED_OTHER
        ranges.append((cached, at.end, cause))
        start = at.end
    if start < full_depth:
        ranges += _stateless_above(last, start, full_depth, state_evicted)
    return tuple(ranges)


def _swa_cause_above(node: Node, tomb_cause: dict[Node, str]) -> str:
    """``_swa_cause_on_path``: the cause of the deepest tombstone at or above ``node``."""
    while node.parent is not None and node.swa_pages is not None:
        node = node.parent
    return tomb_cause.get(node, SWA_TRIGGER) if node.parent is not None else BLOCKED_OTHER


def _stateless_above(last: Node, start: int, full_depth: int, state_evicted: dict[Node, str]) -> list[Range]:
    """``_stateless_on_path``, up the links; no climb where no state was evicted (it would find none)."""
    node = last
    while state_evicted and node.end > start and node not in state_evicted:
        node = node.parent
    if not state_evicted or node.end <= start:
        return [(start, full_depth, MAMBA_STATE)]
    ranges = [(start, node.end, state_evicted[node])]
    return ranges + ([(node.end, full_depth, MAMBA_STATE)] if node.end < full_depth else [])


def may_join(tomb_cause: dict[Node, str], state_evicted: dict[Node, str], upper: Node, lower: Node) -> bool:
    """Whether the watcher lets ``upper`` and its child ``lower`` be one run node (``tree_runs``): not where it
    holds a dropped state's cause above the run's end, nor two tombstones' different causes (a live node's
    cause is read only once it is a tombstone again, which sets it)."""
    if upper in state_evicted:
        return False
    return upper.swa_pages is not None or tomb_cause.get(upper) == tomb_cause.get(lower)


def forget(tomb_cause: dict[Node, str], links: dict[Node, tuple], node: Node) -> None:
    """A node joined into the run below it: its entries go (the run's are the deepest piece's)."""
    tomb_cause.pop(node, None)
    links.pop(node, None)
