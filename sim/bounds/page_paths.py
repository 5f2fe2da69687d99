"""Pages as nodes of a prefix trie: the page at position ``q`` of a sequence is one node per distinct
``(previous page's node, this page's tokens)``, so two requests share a node exactly where a radix cache of
that page size could share the page. Node 0 is the root (no page).

The bounds run on the compressed trie (``segment_trie.py``); this one, a node a page, is the reference the
tests hold it to, and what the brute-force optima of ``tests/bounds_helpers.py`` enumerate."""

from __future__ import annotations

from sim.trace import Trace


class PagePaths:
    def __init__(self, trace: Trace, page_size: int):
        self.trace, self.page_size = trace, page_size
        self.parent: list[int] = [0]
        self.depth: list[int] = [0]  # the page depth of each node (the root: 0)
        self._ids: dict[tuple, int] = {}
        self._paths: dict[str, list[int]] = {}

    @property
    def num_nodes(self) -> int:
        return len(self.parent)

    @property
    def length(self) -> list[int]:
        """Pages per node: one, the root none (what ``segment_trie.SegmentTrie`` has per chain)."""
        return [0] + [1] * (len(self.parent) - 1)

    def path(self, request_id: str, num_pages: int) -> list[int]:
        """Node ids of the request's first ``num_pages`` pages (of its prompt + output), cached per request."""
        known = self._paths.get(request_id)
        if known is not None and len(known) >= num_pages:
            return known
        seq, page = self.trace.request_seq(request_id), self.page_size
        ids, parent = self._ids, self.parent
        path = list(known or [])
        node, start, end = (path[-1] if path else 0), len(path) * page, num_pages * page
        position = 0
        for source, offset, length in seq.runs:  # a page inside one run is keyed (node, source, offset)
            run_end = position + length
            while start < run_end and start < end:
                key: tuple  # a page inside one run: (node, source, offset); else (node, its runs)
                if start >= position and start + page <= run_end:
                    key = (node, source, offset + start - position)
                else:
                    key = (node, seq.slice(start, start + page).runs)
                child = ids.get(key)
                if child is None:
                    child = ids[key] = len(parent)
                    parent.append(node)
                    self.depth.append(len(path) + 1)
                path.append(child)
                node, start = child, start + page
            position = run_end
        self._paths[request_id] = path
        return path

    def prefetch(self, events: list) -> None:
        """Build each request's path once, as deep as any of its events reaches."""
        deepest: dict[str, int] = {}
        for event in events:
            end = event.key_pages if hasattr(event, "key_pages") else event.end_page
            deepest[event.request_id] = max(deepest.get(event.request_id, 0), end)
        for request_id, end in deepest.items():
            self.path(request_id, end)

    def pages(self, event) -> list[int]:
        """The nodes an event (``events.Lookup`` or ``events.Produce``) covers."""
        if hasattr(event, "key_pages"):
            return self.path(event.request_id, event.key_pages)[: event.key_pages]
        return self.path(event.request_id, event.end_page)[event.first_page : event.end_page]
