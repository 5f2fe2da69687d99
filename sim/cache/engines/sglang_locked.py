"""The tree pages SGLang's eviction cannot take from under a prefill pass: those the running requests' locks
(and the candidate's) hold. ``SGLangAdmission`` subtracts them from the tree's pages to get what is
evictable (``full_evictable_size``, ``swa_evictable_size``).

``locked_pages`` is the rule as stated (every holder's whole path, deduplicated) and stays the reference;
``locked_pages_shared`` is what the budget asks at each check: the same sum, but a FULL walk up from a holder
stops at the first node an earlier holder's walk counted (the union of paths to the root is closed under
taking parents: that node's ancestors are all counted already), so the shared prefixes of the running
requests are walked once per call instead of once per request. tests/test_sglang_locked_property.py holds
the two equal at every budget check of generated runs.

``locked_full_pages`` reads the same FULL count off the tree's tallies, with no walk (``LOCKED_FROM_TALLIES``;
the shared walk is then the reference): a node is on a holder's path exactly while it holds a FULL lock (each
running request locks its ``last_node``'s path to the root, the candidate its matched prefix's from admission
on, ``relock`` extends a path, and nothing else locks FULL), every node's tokens are whole pages
(``RadixTree.add_leaf``), and the tree tallies its pages and its unlocked nodes' tokens as nodes come, go,
lock and unlock: the locked pages are its pages less the unlocked tokens' pages. A timed run asks ~4,200 times
(~3% of SGLang's timed CPU by the walk). tests/test_sglang_locked_tallies_property.py holds it to
``locked_pages`` at every budget check, and whole runs to the walk's.
"""

from __future__ import annotations

from sim.cache.request import RequestCache

# the FULL count from the tree's tallies (``locked_full_pages``); False: the shared walk, the reference
LOCKED_FROM_TALLIES = True


def locked_pages(manager, candidate: RequestCache | None, swa: bool) -> int:
    """Pages of the tree that running requests' locks (and the candidate's) keep from eviction: FULL on
    their paths to the root, SWA on the live nodes of their windows."""
    seen: set[int] = set()
    locked = 0
    holders = list(manager.requests.values())
    if candidate is not None and candidate.request_id not in manager.requests:
        holders.append(candidate)
    for holder in holders:
        nodes = holder.locks.swa_nodes if swa else holder.last_node.path_from_root()
        for node in nodes:
            pages = node.swa_pages if swa else node.full_pages
            if node.id not in seen and pages is not None:
                seen.add(node.id)
                locked += len(pages)
    return locked


def locked_pages_shared(manager, candidate: RequestCache | None, swa: bool) -> int:
    """``locked_pages``, each FULL path walked up only to where an earlier holder's walk reached (the
    root's own pages are never counted, as ``path_from_root`` leaves it out)."""
    if swa:
        return locked_pages(manager, candidate, swa)  # a window is a few nodes: nothing shared to skip
    if LOCKED_FROM_TALLIES:
        return locked_full_pages(manager)
    return _pages_on_paths(manager, candidate, swa=False)


def locked_full_pages(manager) -> int:
    """The FULL pages of the nodes some lock holds: the tree's pages less its unlocked nodes' (whole pages
    each), both tallied by the tree as nodes come, go, lock and unlock."""
    tree = manager.tree
    return tree.num_full_pages - tree.num_unlocked_tokens // manager.page_size


def swa_pages_on_locked_paths(manager, candidate: RequestCache | None) -> int:
    """The SWA pages on the nodes the holders' FULL locks keep (each path walked up as
    ``locked_pages_shared`` walks it): an eviction that deletes whole unlocked nodes and never tombstones
    (Marconi's) cannot free them, whatever a window's lock covers."""
    return _pages_on_paths(manager, candidate, swa=True)


def _pages_on_paths(manager, candidate: RequestCache | None, swa: bool) -> int:
    """The FULL (or SWA) pages of the nodes on the holders' paths to the root, each node once: a walk up stops
    at the first node an earlier holder's walk counted (its ancestors are all counted already)."""
    holders = list(manager.requests.values())
    if candidate is not None and candidate.request_id not in manager.requests:
        holders.append(candidate)
    seen: set[int] = set()
    on_paths = 0
    for holder in holders:
        node = holder.last_node
        while node.parent is not None and node.id not in seen:
            seen.add(node.id)
            pages = node.swa_pages if swa else node.full_pages
            if pages is not None:
                on_paths += len(pages)
            node = node.parent
    return on_paths
