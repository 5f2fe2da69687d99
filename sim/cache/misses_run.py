"""The miss watcher told a run's leaf evictions at once: ``TreeMissTracker._on_delete_leaf`` for each evicted
leaf in turn, without an event object, a handler call and the watcher's attribute reads per leaf.

vLLM+'s chunk run (``marconi_vllm_run.py``) evicts one leaf per 32-token chunk once the pools are full; where
the watcher is the eviction's only observer and nothing else is told anything between (``defers_to``), the
run keeps its victims and tells them here before anything else runs (the rules' own calls, the run's end).
What the watcher records of a victim (the node, its edge, its parent chain's keys and nodes) does not change
once it is evicted, nor while the run only evicts leaves and hangs new ones, so the tables come out the same,
in the same order. ``_on_delete_leaf`` stays the reference (switch ``marconi_vllm_run.WATCHER_AS_RUN``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.cache import misses, misses_evicted, misses_spans
from sim.cache.misses import TreeMissTracker
from sim.cache.misses_evicted import _NONE, put_entry, source_place, sourced_base, sourced_entry
from sim.cache.misses_hashing import link_hash
from sim.cache.misses_spans import add_leaf
from sim.cache.node import Node


def defers_to(told: list[Callable] | None) -> TreeMissTracker | None:
    """The miss watcher whose ``_on_delete_leaf`` is ``told``'s one handler (``told_as_one``), else None."""
    if told is None:
        return None
    handler = told[0]
    watcher = getattr(handler, "__self__", None)
    if type(watcher) is not TreeMissTracker or handler != watcher._on_delete_leaf:
        return None
    return watcher


def tell_evicted(watcher: TreeMissTracker, nodes: list[Node]) -> None:
    """``watcher._on_delete_leaf(LeafEvicted(node))`` for each of ``nodes`` in order; ``nodes`` emptied."""
    if not nodes:
        return
    links, pages, unhashed = watcher._prefix_links, watcher.evicted_pages, watcher.unhashed
    max_unhashed, folded = misses.MAX_UNHASHED, misses.FOLD_ON_LINKS
    sourced = folded and misses_evicted.SOURCED and watcher.request_seq is not None
    base_kept = misses_evicted.BASE_KEPT
    last_source: str | None = None  # the last sourced leaf's request, its entries ``source_base`` + a start
    source_base = 0
    tomb_cause, state_evicted, sources = watcher.tomb_cause, watcher.state_evicted, watcher.sources
    spans, page = watcher.spans, watcher.tree.page_size
    per_request, at = sourced and misses_spans.PER_REQUEST, spans.spans
    span_source: str | None = None  # the request of the span the last leaf went on, while ``sources``' last
    for node in nodes:
        source = node.source
        if per_request and source is not None and node.end - node.start == page:  # ``spanned``, in line
            if source is span_source and node.end == at[-2]:
                at[-2] = node.start  # ``add_leaf``'s first case: the span (this telling's) one page longer
            else:
                add_leaf(spans, source_place(sources, source), node.start, node.end)
                span_source, last_source = source, None  # ``sources`` may have grown: a base made again
        else:
            span_source = None  # a sourced entry below may add to ``sources``
            if source is None:  # the parent's path is all the entry reads (``misses_evicted``)
                source = node.parent.source
            above: Any
            if sourced and source is not None:  # its int made where a match asks (``misses_evicted``)
                if not base_kept:
                    above = sourced_entry(sources, source, node.start)
                else:
                    if source is not last_source:  # else ``sources``' last is still it: the same place
                        last_source, source_base = source, sourced_base(sources, source)
                    above = source_base + node.start  # ``sourced_entry``'s int: one 65-bit sum, not two
            else:
                parent = node.parent
                above = links.get(parent, _NONE)  # ``_prefix_link``'s answer where the parent's link is made
                if above is _NONE:
                    above = watcher._prefix_link(parent)
                if folded:
                    above = link_hash(above)
            key = hash(node.edge)
            put_entry(pages, key, above)  # with spans (``PER_REQUEST``) ~926 leaves at 1,000: not in line
            if not folded:
                unhashed.append(key)
                if max_unhashed is not None and len(unhashed) > max_unhashed:
                    watcher.hash_unhashed()
        if links:  # empty where every node told was sourced
            links.pop(node, None)
        if tomb_cause:
            tomb_cause.pop(node, None)
        if state_evicted:
            state_evicted.pop(node, None)
    watcher._deleted = nodes[-1]
    nodes.clear()
