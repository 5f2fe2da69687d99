"""The offline optimum for FULL attention under a page budget: Belady's MIN over a prefix trie of pages.

Events in order (``events.py``): a lookup hits the pages of its key present in the cache from the root on;
a request's computed pages may then be kept. With the whole future known, keep the pages whose next counted
lookup comes soonest: a produced page is inserted only if some present leaf is needed later than it (that
leaf is evicted), else it and the rest of its request are bypassed. A page's next use is never later than
its child's (every lookup of the child also looks up the page), so evicting the furthest leaf keeps the
cache closed under prefixes, and page hits are exactly the contiguous-from-the-root hits a radix cache
reports; with unit pages and optional insertion, furthest-next-use is optimal (Belady 1966, with bypass).

This is also what kvcache-simulator's OPTIMAL computes (its ``simulate_trie_policy(optimal=True)``), block
for block, when given the same lookups; ``benchmarks/bounds_vs_peer.py`` checks it.
"""

from __future__ import annotations

import heapq

from sim.bounds.events import Lookup
from sim.bounds.page_paths import PagePaths


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
    """Present pages, their children counts and next uses; a max-heap of leaves by next use (lazy)."""

    def __init__(self, parent: list[int], capacity: int):
        self.parent, self.capacity = parent, capacity
        self.present = bytearray(len(parent))
        self.present[0] = 1
        self.children = [0] * len(parent)
        self.key = [0] * len(parent)
        self.size = 0
        self.heap: list[tuple[int, int]] = []

    def set_key(self, page: int, next_use: int) -> None:
        self.key[page] = next_use
        if not self.children[page]:
            heapq.heappush(self.heap, (-next_use, page))

    def insert(self, page: int, next_use: int) -> None:
        self.present[page] = 1
        self.size += 1
        self.children[self.parent[page]] += 1
        self.set_key(page, next_use)

    def make_room(self, next_use: int) -> bool:
        """Evict the leaf needed furthest in the future if it is needed later than ``next_use``."""
        heap = self.heap
        while heap:
            negative, page = heap[0]
            if not self.present[page] or self.children[page] or self.key[page] != -negative:
                heapq.heappop(heap)
                continue
            if -negative <= next_use:
                return False
            heapq.heappop(heap)
            self.present[page] = 0
            self.size -= 1
            parent = self.parent[page]
            self.children[parent] -= 1
            if parent and not self.children[parent]:
                heapq.heappush(heap, (-self.key[parent], parent))
            return True
        return False


def belady_hits(events: list, paths: PagePaths, capacity_pages: int) -> dict[str, int]:
    """Request id -> tokens its counted lookup hits under Belady with ``capacity_pages`` pages."""
    pages_of = [paths.pages(event) for event in events]
    hits = belady_page_hits(events, pages_of, paths.parent, capacity_pages)
    return {request_id: pages * paths.page_size for request_id, pages in hits.items()}


def belady_page_hits(
    events: list, pages_of: list[list[int]], parent: list[int], capacity_pages: int
) -> dict[str, int]:
    """Request id -> pages its counted lookup hits; ``pages_of[i]``: the trie nodes event i covers (node 0 is
    the root, ``parent[node]`` its parent)."""
    uses, never = next_uses(events, pages_of, len(parent))
    cache = _Cache(parent, capacity_pages)
    hits: dict[str, int] = {}
    for event, pages, nexts in zip(events, pages_of, uses, strict=True):
        if isinstance(event, Lookup):
            hit = _hit(cache, pages, nexts)
            if event.counted:
                hits[event.request_id] = hit
            continue
        _produce(cache, pages, nexts, never)
    return hits


def _produce(cache: _Cache, pages: list[int], nexts: list[int], never: int) -> None:
    for page, next_use in zip(pages, nexts, strict=True):
        if cache.present[page]:
            cache.set_key(page, next_use)
            continue
        if not cache.present[cache.parent[page]] or next_use >= never:
            return  # a page without its parent is no use; one never looked up again neither (nor its children)
        if cache.size >= cache.capacity and not cache.make_room(next_use):
            return  # every present leaf is needed sooner: bypass this page and the rest of the request
        cache.insert(page, next_use)


def _hit(cache: _Cache, pages: list[int], nexts: list[int]) -> int:
    """Pages present from the root on; each gets its next use (leaves re-queued)."""
    present, key, children, heap = cache.present, cache.key, cache.children, cache.heap
    hit = 0
    for page, next_use in zip(pages, nexts, strict=True):
        if not present[page]:
            break
        hit += 1
        key[page] = next_use
        if not children[page]:
            heapq.heappush(heap, (-next_use, page))
    return hit
