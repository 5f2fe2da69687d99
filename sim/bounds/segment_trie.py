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

from sim.bounds import trie_cursor
from sim.bounds.events import Lookup
from sim.bounds.trie_cursor import common_tokens, moved_on, page_key
from sim.tokens import TokenSeq
from sim.trace import Trace

# True: a request's sequence is walked by a cursor as it is inserted, each child's key made and label compared in
# place (``_insert_in_place``); False: each key and label searched for and cut out (the reference;
# tests/test_segment_trie.py holds both equal)
LABELS_IN_PLACE = True
# True: an insert's label compare runs on to the sequence's deepest page, and a next child labelled by the same
# sequence from the token where the last compare stood takes what is left of it (a request's path runs through an
# earlier request's nodes, all labelled by that request's sequence); False: each child compared up to its span
# (the reference; tests/test_segment_trie.py holds both equal)
CARRY_COMPARE = True


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
        child's label compared where it lies in its own sequence (no slice), up to the label's end."""
        page, runs = self.page_size, seq.runs
        node = position = next_cut = run = inside = (
            0  # token ``position * page`` is ``runs[run]``'s ``inside``-th
        )
        known_seq, known_at, known = (
            None,
            0,
            0,
        )  # ``known`` tokens of ``known_seq`` from ``known_at`` equal seq's here
        while position < deepest:
            while cuts[next_cut] <= position:
                next_cut += 1
            child = self._children[node].get(page_key(seq, run, inside, page, position * page))
            if child is None:
                return self._add_chain_in_place(node, seq, position, cuts[next_cut:], run, inside)
            span, label, label_at = (
                self.depth[child] - position,
                self._label_seq[child],
                self._label_at[child],
            )
            if label is known_seq and label_at == known_at and known >= page:
                common = known
            elif CARRY_COMPARE:
                common = common_tokens(label, label_at, runs, run, inside, (deepest - position) * page)
                known_seq = label
            else:
                common = common_tokens(label, label_at, runs, run, inside, span * page)
            stop = min(span, common // page, cuts[next_cut] - position)
            known_at, known = label_at + stop * page, common - stop * page
            assert stop > 0, "a child keyed by the sequence's next page holds at least that page"
            if stop < span:
                child = self._split(child, stop)
            node, position = child, position + stop
            run, inside = moved_on(runs, run, inside + stop * page)
        return node

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
        page = self.page_size
        # no move past the chain's last node: no key is read there
        last = ends[-1] if trie_cursor.CURSOR_DIRECT else -1
        for end in ends:
            child = self._new_node(node, end, seq, position * page)
            self._children[node][page_key(seq, run, inside, page, position * page)] = child
            if end != last:
                run, inside = moved_on(seq.runs, run, inside + (end - position) * page)
            node, position = child, end
        return node

    def _new_node(self, parent: int, depth: int, seq: TokenSeq, token_at: int) -> int:
        self.parent.append(parent)
        self.depth.append(depth)
        self._label_seq.append(seq)
        self._label_at.append(token_at)
        self._children.append({})
        return len(self.parent) - 1

    def _split(self, child: int, num_pages: int) -> int:
        """Cut ``child`` after its first ``num_pages`` pages; the new upper node takes its place."""
        parent, seq, at = self.parent[child], self._label_seq[child], self._label_at[child]
        top = self._new_node(parent, self.depth[parent] + num_pages, seq, at)
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
