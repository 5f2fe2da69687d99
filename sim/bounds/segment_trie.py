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

from sim.bounds.events import Lookup
from sim.tokens import TokenSeq
from sim.trace import Trace


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

    def __init__(self, trace: Trace, page_size: int, events: list):
        self.trace, self.page_size = trace, page_size
        self.parent: list[int] = [0]
        self.depth: list[int] = [0]
        self._label: list[TokenSeq] = [TokenSeq()]  # the tokens of the node's pages
        self._children: list[dict[tuple, int]] = [{}]  # keyed by the runs of the child's first page
        reach = event_reach(events)
        for request_id, (deepest, cuts) in reach.items():
            self._insert(trace.request_seq(request_id), deepest, cuts)
        self._paths: dict[str, list[int]] = {}
        self._depths: dict[str, list[int]] = {}
        for request_id, (deepest, _) in reach.items():
            path = self._walk(trace.request_seq(request_id), deepest)
            self._paths[request_id] = path
            self._depths[request_id] = [self.depth[node] for node in path]

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
        start = at_page * self.page_size
        return seq.slice(start, start + self.page_size).runs

    def _insert(self, seq: TokenSeq, deepest: int, cuts: list[int]) -> None:
        """Descend along ``seq`` to page ``deepest``, splitting where it parts from the tree or a cut falls."""
        node = position = 0
        next_cut = 0  # index into cuts of the first cut past position
        while position < deepest:
            while cuts[next_cut] <= position:
                next_cut += 1
            child = self._children[node].get(self._first_page(seq, position))
            if child is None:
                self._add_chain(node, seq, position, cuts[next_cut:])
                return
            span = self.depth[child] - position
            same = self._label[child].common_prefix_len(seq, position * self.page_size) // self.page_size
            stop = min(span, same, cuts[next_cut] - position)
            if stop < span:
                child = self._split(child, stop)
            node, position = child, position + stop

    def _add_chain(self, node: int, seq: TokenSeq, position: int, ends: list[int]) -> None:
        """New nodes below ``node`` for ``seq``'s pages from ``position``, ending at each of ``ends``."""
        page = self.page_size
        for end in ends:
            child = self._new_node(node, end, seq.slice(position * page, end * page))
            self._children[node][self._first_page(seq, position)] = child
            node, position = child, end

    def _new_node(self, parent: int, depth: int, label: TokenSeq) -> int:
        self.parent.append(parent)
        self.depth.append(depth)
        self._label.append(label)
        self._children.append({})
        return len(self.parent) - 1

    def _split(self, child: int, num_pages: int) -> int:
        """Cut ``child`` after its first ``num_pages`` pages; the new upper node takes its place."""
        parent, label, cut = self.parent[child], self._label[child], num_pages * self.page_size
        top = self._new_node(parent, self.depth[parent] + num_pages, label.slice(0, cut))
        self._children[parent][self._first_page(label, 0)] = top
        self._label[child] = rest = label.slice(cut)
        self._children[top][self._first_page(rest, 0)] = child
        self.parent[child] = top
        return top

    def _walk(self, seq: TokenSeq, deepest: int) -> list[int]:
        path: list[int] = []
        node = position = 0
        while position < deepest:
            node = self._children[node][self._first_page(seq, position)]
            path.append(node)
            position = self.depth[node]
        return path
