"""The why watcher told vLLM+'s chain victims in the chain's own pass (``marconi_vllm_chain_pass.TELLS_IN_PASS``),
not kept on the run's list for ``misses_run.tell_evicted``'s second pass.

A chain evicts one old path bottom up, a one-page leaf a chunk (~1.5 M victims at 4,000 Mooncake requests), each
victim the parent of the last, so its ``end`` is the last victim's ``start``. ``tell_evicted`` puts such leaves
on spans (``misses_spans.PER_REQUEST``): a leaf of the same request as the span before it moves the span's start
down a page. Told in the pass, a run of victims of one request is one ``add_leaf`` of its whole range, made where
the request changes or the chain stops, which leaves ``spans`` and ``sources`` as the leaves one by one would
(``add_leaf`` moves a span's start only where the leaf ends at it, as each next victim does); each victim's rows
are dropped in the pass, as ``tell_evicted`` drops them. A victim the spans do not take (no
``source``, not one page) goes on ``evicted`` with every victim after it, for ``tell_evicted``, in order.
"""

from __future__ import annotations

from typing import Any

from sim.cache import misses, misses_evicted, misses_spans
from sim.cache.misses import TreeMissTracker
from sim.cache.misses_evicted import source_place
from sim.cache.misses_run import tell_evicted
from sim.cache.misses_spans import add_leaf
from sim.cache.node import Node

NO_SPAN: Any = object()  # the request of no span: no victim's ``source`` is it


def begin(watcher: TreeMissTracker, evicted: list[Node]) -> TreeMissTracker | None:
    """The watcher to tell in the pass (the victims already kept on ``evicted`` told first, in order), or None
    where ``tell_evicted`` would not put a one-page leaf on a span (its victims then go on ``evicted``)."""
    if not (misses.FOLD_ON_LINKS and misses_evicted.SOURCED and misses_spans.PER_REQUEST):
        return None
    if watcher.request_seq is None:
        return None
    tell_evicted(watcher, evicted)
    return watcher


def add_span(watcher: TreeMissTracker, source: Any, start: int, end: int) -> None:
    """The one-page leaves ``[start, end)`` of request ``source``, told bottom up, put on the spans (none where
    ``source`` is ``NO_SPAN``)."""
    if source is not NO_SPAN:
        add_leaf(watcher.spans, source_place(watcher.sources, source), start, end)


def close(watcher: TreeMissTracker, source: Any, start: int, end: int, told: bool, last: Node | None) -> None:
    """The pass's last span put on (``add_span``); where it told a victim (``told``), ``tell_evicted``'s last
    deleted node set (``TreeMissTracker._deleted``): ``last``, or None where the victims live on as new leaves
    (``marconi_vllm_chain_pass.REUSES_VICTIMS``: a dead node hears no event, so no live node may be it)."""
    add_span(watcher, source, start, end)
    if told:
        watcher._deleted = last


def spans_take(node: Node, page: int) -> bool:
    """Whether ``tell_evicted`` puts an evicted leaf on a span (with spans on): a source and one page."""
    return node.source is not None and node.end - node.start == page
