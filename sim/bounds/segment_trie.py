"""The page trie compressed: a node is a run of pages that no branch and no event boundary splits.

``page_paths.PagePaths`` makes a node of every page (at page 1, of every token: millions of nodes and GB of
keys for a 1,000-request trace). Here a node stands for a chain of those pages: the trie is a radix tree of
the requests' token sequences (prompt + output), split wherever two requests part and wherever any event
(``events.Lookup``, ``events.Produce``) of a request starts or ends. So every event covers whole nodes, all
pages of a node are covered by the same events, and a node's pages share their next use and last touch:
the bounds can treat the node as one item with a count of pages (``belady.py``, ``state_bound.py``) and get
exactly what the page trie gives (``tests/test_segment_trie.py``).

Node 0 is the root (no pages); ``depth[n]`` is the page depth where node ``n`` ends, ``length[n]`` its pages.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from sim.bounds.events import Lookup
from sim.bounds.trie_cursor import carried_common, common_tokens, moved_on, page_key
from sim.tokens import TokenSeq
from sim.trace import Trace

# True: a request's sequence is walked by a cursor as it is inserted, each child's key made and label compared in
# place (``_insert_in_place``); False: each key and label searched for and cut out (the reference;
# tests/test_segment_trie.py holds both equal)
LABELS_IN_PLACE = True
# True: a descent's label compare runs to the descent's end, and a child whose label continues the last one compared
# (the same sequence at the same shift) reads that match (``trie_cursor.carried_common``; 81% of the children a
# 4,000-request timed run's inserts pass); and from a child it goes on down the chain an insert made it in, to where
# the match, ``deepest`` or a cut inside a node stops it, with no key, compare or cursor move per node
# (``_down_chain``); False: child by child, each label compared up to its own end (the reference;
# tests/test_segment_trie.py)
MATCH_CARRIED = True


def event_reach(events: list) -> dict[str, tuple[int, list[int]]]:
    """Request id -> (the deepest page any of its events reaches, every page boundary its events have)."""
    cuts: dict[str, set[int]] = {}
    for event in events:
        if isinstance(event, Lookup):
            cuts.setdefault(event.request_id, set()).add(event.key_pages)
        else:
            cuts.setdefault(event.request_id, set()).update((event.first_page, event.end_page))
    return {request_id: (max(ends), sorted(ends)) for request_id, ends in cuts.items()}


class SegmentTrie:
    """The compressed page trie of the requests an event list names, split at every event's boundaries."""

    def __init__(
        self, trace: Trace, page_size: int, events: list, seqs: Mapping[str, TokenSeq] | None = None
    ):
        """``seqs``: request id -> ``trace.request_seq`` of it, where the run holds them (others are made)."""
        self.trace, self.page_size = trace, page_size
        self.parent: list[int] = [0]
        self.depth: list[int] = [0]
        # a node's pages are tokens [at, at + its pages * page size) of the sequence that made it
        self._label_seq: list[TokenSeq] = [TokenSeq()]
        self._label_at: list[int] = [0]
        self._children: list[dict[tuple, int]] = [{}]  # keyed by the runs of the child's first page
        self._chain_end: list[int] = [
            0
        ]  # the last node of the chain an in-place insert made the node in (else 0)
        # a split gives the upper part a new id and the lower keeps its own, so the node a request's path
        # ends at when inserted ends it for good: its path is that node's ancestors
        seqs = seqs or {}
        ends = {
            request_id: self._insert(seqs.get(request_id) or trace.request_seq(request_id), deepest, cuts)
            for request_id, (deepest, cuts) in event_reach(events).items()
        }
        self._paths = {request_id: self._ancestors(end) for request_id, end in ends.items()}
        self._depths = {
            request_id: [self.depth[node] for node in path] for request_id, path in self._paths.items()
        }

    @property
    def num_nodes(self) -> int:
        return len(self.parent)

    @property
    def length(self) -> list[int]:
        """Pages per node (the root: 0)."""
        depth, parent = self.depth, self.parent
        return [depth[node] - depth[parent[node]] for node in range(len(parent))]

    def pages(self, event) -> list[int]:
        """The nodes an event covers (whole nodes: the trie is split at the event's boundaries)."""
        path, depths = self._paths[event.request_id], self._depths[event.request_id]
        if isinstance(event, Lookup):
            return path[: bisect.bisect_right(depths, event.key_pages)]
        return path[
            bisect.bisect_right(depths, event.first_page) : bisect.bisect_right(depths, event.end_page)
        ]

    def _first_page(self, seq: TokenSeq, at_page: int) -> tuple:
        return seq.first_page(self.page_size, at_page * self.page_size)

    def _insert(self, seq: TokenSeq, deepest: int, cuts: list[int]) -> int:
        """Descend along ``seq`` to page ``deepest``, splitting where it parts from the tree or a cut falls;
        the node that ends at ``deepest``. ``LABELS_IN_PLACE``: ``seq``'s runs walked by a cursor as it descends,
        each child's key made and label compared from there (``_insert_in_place``)."""
        if LABELS_IN_PLACE:
            return self._insert_in_place(seq, deepest, cuts)
        page = self.page_size
        node = position = 0
        next_cut = 0  # index into cuts of the first cut past position
        while position < deepest:
            while cuts[next_cut] <= position:
                next_cut += 1
            child = self._children[node].get(self._first_page(seq, position))
            if child is None:
                return self._add_chain(node, seq, position, cuts[next_cut:])
            span = self.depth[child] - position
            start = self._label_at[child]
            label = self._label_seq[child].slice(start, start + span * page)
            stop = min(span, label.common_prefix_len(seq, position * page) // page, cuts[next_cut] - position)
            if stop < span:
                child = self._split(child, stop)
            node, position = child, position + stop
        return node

    def _insert_in_place(self, seq: TokenSeq, deepest: int, cuts: list[int]) -> int:
        """``_insert`` with ``seq``'s run and offset at the position carried down (no search of its runs) and each
        child's label compared where it lies in its own sequence (no slice), up to the label's end (``MATCH_CARRIED``:
        to the descent's end, read again by the labels that continue it, and on down a chain at once)."""
        page, runs = self.page_size, seq.runs
        node = position = next_cut = run = inside = (
            0  # token ``position * page`` is ``runs[run]``'s ``inside``-th
        )
        carried: list | None = (
            [None, 0, 0] if MATCH_CARRIED else None
        )  # (label, its shift, our tokens matched to)
        while position < deepest:
            while cuts[next_cut] <= position:
                next_cut += 1
            child = self._children[node].get(page_key(seq, run, inside, page, position * page))
            if child is None:
                return self._add_chain_in_place(node, seq, position, cuts[next_cut:], run, inside)
            span = self.depth[child] - position
            label, label_at = self._label_seq[child], self._label_at[child]
            if carried is None:
                common = common_tokens(label, label_at, runs, run, inside, span * page)
            else:
                at = position * page
                common = carried_common(carried, label, label_at, at, runs, run, inside, deepest * page - at)
            stop = min(span, common // page, cuts[next_cut] - position)
            assert stop > 0, "a child keyed by the sequence's next page holds at least that page"
            if stop < span:
                child = self._split(child, stop)
            if carried and stop == span:  # (and on down ``child``'s chain)
                child = self._down_chain(child, carried[2], deepest, cuts, next_cut)
            node, to = child, (self.depth[child] if carried else position + stop)
            run, inside = moved_on(runs, run, inside + (to - position) * page)
            position = to
        return node

    def _down_chain(self, node: int, matched_to: int, deepest: int, cuts: list[int], next_cut: int) -> int:
        """The deepest node of ``node``'s chain the descent goes on down to unsplit (``node`` where none): our tokens
        equal the chain's label up to its end (``matched_to``: ``node``'s label is the one ``carried`` holds), it is
        not past ``deepest``, and no cut of ours falls inside a node on the way (only at their ends)."""
        depth, parent, end = self.depth, self.parent, self._chain_end[node]
        limit, position = min(deepest, matched_to // self.page_size), depth[node]
        if end == 0 or limit <= position:
            return node
        on_way = []  # the chain's nodes below ``node`` not past ``limit``, deepest first
        while depth[end] > position:  # (up to ``node``: an insert's chain is one path)
            if depth[end] <= limit:
                on_way.append(end)
            end = parent[end]
        while cuts[next_cut] <= position:
            next_cut += 1
        reached = node
        for below in reversed(on_way):
            if cuts[next_cut] < depth[below]:  # a cut inside ``below``: the descent splits it
                break
            reached = below
            while next_cut + 1 < len(cuts) and cuts[next_cut] <= depth[below]:
                next_cut += 1
        return reached

    def _add_chain(self, node: int, seq: TokenSeq, position: int, ends: list[int]) -> int:
        """New nodes below ``node`` for ``seq``'s pages from ``position``, ending at each of ``ends``; the last."""
        for end in ends:
            child = self._new_node(node, end, seq, position * self.page_size)
            self._children[node][self._first_page(seq, position)] = child
            node, position = child, end
        return node

    def _add_chain_in_place(
        self, node: int, seq: TokenSeq, position: int, ends: list[int], run: int, inside: int
    ) -> int:
        """``_add_chain`` with ``seq``'s cursor at ``position`` (``_insert_in_place``'s) carried along."""
        page, first_new = self.page_size, len(self.parent)
        for end in ends:
            child = self._new_node(node, end, seq, position * page)
            self._children[node][page_key(seq, run, inside, page, position * page)] = child
            run, inside = moved_on(seq.runs, run, inside + (end - position) * page)
            node, position = child, end
        self._chain_end[first_new:] = [node] * (len(self.parent) - first_new)
        return node

    def _new_node(self, parent: int, depth: int, seq: TokenSeq, token_at: int) -> int:
        self.parent.append(parent)
        self.depth.append(depth)
        self._label_seq.append(seq)
        self._label_at.append(token_at)
        self._children.append({})
        self._chain_end.append(0)
        return len(self.parent) - 1

    def _split(self, child: int, num_pages: int) -> int:
        """Cut ``child`` after its first ``num_pages`` pages; the new upper node takes its place."""
        parent, seq, at = self.parent[child], self._label_seq[child], self._label_at[child]
        top = self._new_node(parent, self.depth[parent] + num_pages, seq, at)
        self._chain_end[top] = self._chain_end[child]
        self._children[parent][seq.first_page(self.page_size, at)] = top
        self._label_at[child] = rest = at + num_pages * self.page_size
        self._children[top][seq.first_page(self.page_size, rest)] = child
        self.parent[child] = top
        return top

    def _ancestors(self, node: int) -> list[int]:
        """The nodes from the root's child down to ``node`` (none for the root)."""
        path: list[int] = []
        parent = self.parent
        while node:
            path.append(node)
            node = parent[node]
        path.reverse()
        return path
