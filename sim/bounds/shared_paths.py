"""A request's descent through the page trie taken along an earlier request's path, where its sequence repeats that
request's (``segment_trie.SHARED_PREFIX``).

A follow-up's prompt quotes an earlier request's output, and so holds that request's prompt and output before it:
its first pages are the earlier request's, whose path is already in the trie. ``SegmentTrie._insert_in_place``
walks those pages node by node (a key made, a child looked up, a label compared). Here they are followed along the
earlier request's path instead: a child keyed by a page both sequences share is that path's node (a node's key is
its first page's tokens), and every label on that path holds the earlier sequence's tokens, so the walk stops where
it would: at a cut of the request's, or where the two sequences part (their common tokens over the page size), the
node cut there as the walk cuts it. The splits fall in the same order, so the nodes get the same ids; the walk goes
on from where this stops.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.tokens import TokenSeq, match_runs


def earlier_quoted(
    seq: TokenSeq, inserted: dict[str, tuple[TokenSeq, int, int]]
) -> tuple[TokenSeq, int, int] | None:
    """The (sequence, deepest page, end node) of the last request whose output ``seq`` quotes and that is in the
    trie already (``inserted``: keyed by the request's output source), or None."""
    runs = seq.runs
    index = len(runs) - 1
    while index >= 0:
        found = inserted.get(runs[index][0])
        if found is not None:
            return found
        index -= 1
    return None


def shared_pages(seq: TokenSeq, deepest: int, earlier: tuple[TokenSeq, int, int], page: int) -> int:
    """How many of ``seq``'s first pages (up to page ``deepest``) lie on ``earlier``'s path: those the two
    sequences share, up to the earlier's deepest page."""
    earlier_seq, earlier_deepest = earlier[0], earlier[1]
    common = match_runs(earlier_seq.runs, 0, 0, seq.runs, 0, 0, deepest * page)[0]
    return min(common // page, earlier_deepest, deepest)


def descend_along(
    path: list[int], depth: list[int], shared: int, cuts: list[int], split: Callable[[int, int], int]
) -> tuple[int, int, int]:
    """A descent over the first ``shared`` pages along ``path`` (the earlier request's nodes from the root's child
    down), each node cut where a cut of ``cuts`` or the page ``shared`` falls inside it (``split``: the trie's):
    the node it reaches, its page depth (``shared``), and the index of the first cut past it."""
    node = position = next_cut = along = 0
    while position < shared:
        while cuts[next_cut] <= position:
            next_cut += 1
        child = path[along]
        span = depth[child] - position
        stop = min(span, shared - position, cuts[next_cut] - position)
        if stop < span:
            child = split(child, stop)  # ``path[along]`` is the lower part now, the next one down
        else:
            along += 1
        node, position = child, position + stop
    return node, position, next_cut
