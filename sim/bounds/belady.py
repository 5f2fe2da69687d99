"""The offline optimum for FULL attention under a page budget: Belady's MIN over a prefix trie of pages.

Events in order (``events.py``): a lookup hits the pages of its key present in the cache from the root on;
a request's computed pages may then be kept. With the whole future known, keep the pages whose next counted
lookup comes soonest: a produced page is inserted only if some present leaf is needed later than it (that
leaf is evicted), else it and the rest of its request are bypassed. A page's next use is never later than
its child's (every lookup of the child also looks up the page), so evicting the furthest leaf keeps the
cache closed under prefixes, and page hits are exactly the contiguous-from-the-root hits a radix cache
reports; with unit pages and optional insertion, furthest-next-use is optimal (Belady 1966, with bypass).

The trie's nodes are chains of pages (``segment_trie.py``: every event covers whole nodes), so a node is
kept as a count of its first pages, and pages are inserted and evicted a node's worth at a time where page
by page would do the same; the per-page trie (``page_paths.py``, a node a page) gives the same hits.

This is also what kvcache-simulator's OPTIMAL computes (its ``simulate_trie_policy(optimal=True)``), block
for block, when given the same lookups; ``benchmarks/bounds_vs_peer.py`` checks it.
"""

from __future__ import annotations

import heapq

from sim.bounds.events import Lookup
from sim.bounds.page_paths import PagePaths
from sim.bounds.segment_trie import SegmentTrie


def next_uses(events: list, pages_of, num_nodes: int) -> tuple[list[list[int]], int]:
    """Per event, per page it covers: the index of the next counted lookup of that page after the event
    (``never`` if none); and ``never``."""
    never = len(events) + 1
    upcoming = [never] * num_nodes
    out: list[list[int]] = [[] for _ in events]
    for index in range(len(events) - 1, -1, -1):
        event, pages = events[index], pages_of[index]
        out[index] = [upcoming[page] for page in pages]
        if isinstance(event, Lookup) and event.counted:
            for page in pages:
                upcoming[page] = index
    return out, never


class _Cache:
    """Present pages as a count per node (its first ``count`` pages), children counts (of nodes with a page
    present) and next uses; a max-heap of leaves by next use (lazy). A node's pages are covered by the same
    events, so they share a next use; the leaf page of a node with no present child is its last present one."""

    def __init__(self, parent: list[int], length: list[int], capacity: int):
        self.parent, self.length, self.capacity = parent, length, capacity
        self.count = [0] * len(parent)
        self.children = [0] * len(parent)
        self.key = [0] * len(parent)
        self.size = 0
        self.heap: list[tuple[int, int]] = []

    def set_key(self, node: int, next_use: int) -> None:
        self.key[node] = next_use
        if not self.children[node]:
            heapq.heappush(self.heap, (-next_use, node))

    def grow(self, node: int, next_use: int) -> bool:
        """Add the node's missing pages, making room page by page (as many pages at a time as are free or
        as the furthest leaf has); False when the cache refused one (those added stay)."""
        need = self.length[node] - self.count[node]
        while need:
            room = self.capacity - self.size
            if room <= 0:
                room = self.make_room(next_use, need)
                if not room:
                    return False
            added = min(room, need)
            if not self.count[node]:
                self.children[self.parent[node]] += 1
            self.count[node] += added
            self.size += added
            need -= added
            self.set_key(node, next_use)
        return True

    def make_room(self, next_use: int, most: int) -> int:
        """Evict up to ``most`` pages from the leaf needed furthest in the future if it is needed later than
        ``next_use``; how many. Evicting its pages one by one would pick that leaf each time: no other leaf
        shares a next use but among never-used ones, which are all alike to the hits."""
        heap, count, children, key = self.heap, self.count, self.children, self.key
        while heap:
            negative, node = heap[0]
            if not count[node] or children[node] or key[node] != -negative:
                heapq.heappop(heap)
                continue
            if -negative <= next_use:
                return 0
            freed = min(count[node], most)
            count[node] -= freed
            self.size -= freed
            if not count[node]:
                heapq.heappop(heap)
                parent = self.parent[node]
                children[parent] -= 1
                if parent and not children[parent]:
                    heapq.heappush(heap, (-key[parent], parent))
            return freed
        return 0


def belady_hits(
    events: list, paths: SegmentTrie | PagePaths, capacity_pages: int, nodes_of: list[list[int]] | None = None
) -> dict[str, int]:
    """Request id -> tokens its counted lookup hits under Belady with ``capacity_pages`` pages; ``paths`` a
    ``SegmentTrie`` (or the per-page ``PagePaths``): its ``pages(event)`` (or ``nodes_of``, those of every
    event), ``parent`` and ``length``."""
    nodes_of = nodes_of if nodes_of is not None else [paths.pages(event) for event in events]
    hits = belady_node_hits(events, nodes_of, paths.parent, paths.length, capacity_pages)
    return {request_id: pages * paths.page_size for request_id, pages in hits.items()}


def belady_page_hits(
    events: list, pages_of: list[list[int]], parent: list[int], capacity_pages: int
) -> dict[str, int]:
    """Request id -> pages its counted lookup hits; ``pages_of[i]``: the trie nodes event i covers, one page
    each (node 0 is the root, ``parent[node]`` its parent)."""
    return belady_node_hits(events, pages_of, parent, [0] + [1] * (len(parent) - 1), capacity_pages)


def belady_node_hits(
    events: list, nodes_of: list[list[int]], parent: list[int], length: list[int], capacity_pages: int
) -> dict[str, int]:
    """Request id -> pages its counted lookup hits; ``nodes_of[i]``: the nodes event i covers, whole; node
    ``n`` is a chain of ``length[n]`` pages below ``parent[n]`` (node 0, the root, has none)."""
    uses, never = next_uses(events, nodes_of, len(parent))
    cache = _Cache(parent, length, capacity_pages)
    hits: dict[str, int] = {}
    for event, nodes, nexts in zip(events, nodes_of, uses, strict=True):
        if isinstance(event, Lookup):
            hit = _hit(cache, nodes, nexts)
            if event.counted:
                hits[event.request_id] = hit
            continue
        _produce(cache, nodes, nexts, never)
    return hits


def _produce(cache: _Cache, nodes: list[int], nexts: list[int], never: int) -> None:
    count, length, parent = cache.count, cache.length, cache.parent
    for node, next_use in zip(nodes, nexts, strict=True):
        present = count[node]
        if present:
            cache.set_key(node, next_use)
            if present == length[node]:
                continue
        elif count[parent[node]] != length[parent[node]]:
            return  # a page without its parent is no use
        if next_use >= never or not cache.grow(node, next_use):
            return  # never looked up again (nor its children), or every present leaf is needed sooner: bypass


def _hit(cache: _Cache, nodes: list[int], nexts: list[int]) -> int:
    """Pages present from the root on; each node hit gets its next use (leaves re-queued)."""
    count, length, key, children, heap = cache.count, cache.length, cache.key, cache.children, cache.heap
    hit = 0
    for node, next_use in zip(nodes, nexts, strict=True):
        present = count[node]
        if not present:
            break
        hit += present
        key[node] = next_use
        if not children[node]:
            heapq.heappush(heap, (-next_use, node))
        if present < length[node]:
            break
    return hit
