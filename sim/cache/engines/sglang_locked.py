"""The tree pages SGLang's eviction cannot take from under a prefill pass: those the running requests' locks
(and the candidate's) hold. ``SGLangAdmission`` subtracts them from the tree's pages to get what is
evictable (``full_evictable_size``, ``swa_evictable_size``)."""

from __future__ import annotations

from sim.cache.request import RequestCache


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
