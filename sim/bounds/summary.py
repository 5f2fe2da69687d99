"""The bounds as summary keys beside a result (``simulate`` adds them to every summary).

- ``bound_belady_tokens``: Belady for FULL attention with the run's FULL budget (its FULL pool's pages, or
  as many pages as one byte budget could hold), at the policy's page size, over the run's events.
- ``bound_tokens``: the tightest bound for this cache: ``bound_belady_tokens``, and for a cache with MAMBA
  or SWA also the clairvoyant state/window bound (``state_bound.py``) with the MAMBA pool's states (and the
  SWA pool's pages: each kept window needs its last page).
- ``cached_of_bound``: the run's reused tokens over ``bound_tokens`` ("x% of what any policy could reach").

A run whose events cover more than ``MAX_BOUND_PAGES`` pages (one trie node each at most: a whole-hour trace
at page 1) gets ``bound_skipped`` instead, naming why: the limit dates from the per-page trie, which
would have taken many GB; the compressed one (``segment_trie.py``) would not, but raising the limit
changes which runs report bounds, so it is left for a change of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sim.bounds.belady import belady_hits
from sim.bounds.events import Produce
from sim.bounds.segment_trie import SegmentTrie
from sim.bounds.state_bound import state_bound, state_options
from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.interface import CacheModel
from sim.sched.request import served_mask
from sim.tokens import TokenSeq
from sim.trace import Trace

MAX_BOUND_PAGES = 16_000_000


@dataclass(frozen=True, kw_only=True)
class BoundFigures:
    """The summary's bounds section, or why it was skipped (every figure None then)."""

    bound_belady_tokens: int | None = None
    bound_tokens: int | None = None
    cached_of_bound: float | None = None
    bound_skipped: str | None = None


def bounds_summary(
    trace: Trace,
    events: list,
    page_size: int,
    caps: dict[Component, int],
    has_swa: bool,
    has_mamba: bool,
    cached_tokens: int,
    seqs: Mapping[str, TokenSeq] | None = None,
) -> BoundFigures:
    """``seqs``: the requests' sequences the run holds (``SegmentTrie``'s), else each made from the trace."""
    paths = SegmentTrie(trace, page_size, events, seqs)
    nodes_of = [paths.pages(event) for event in events]
    belady = sum(belady_hits(events, paths, caps[FULL], nodes_of).values())
    bound = belady
    if has_mamba or has_swa:
        limits = [caps[MAMBA]] if has_mamba else []
        limits += [caps[SWA]] if has_swa else []
        bound = min(bound, state_bound(state_options(events, paths, nodes_of), min(limits)))
    return BoundFigures(
        bound_belady_tokens=belady,
        bound_tokens=bound,
        cached_of_bound=round(cached_tokens / bound, 6) if bound else 0.0,
    )


def run_bounds(
    trace: Trace,
    events: list,
    manager: CacheModel,
    cached_tokens: int,
    seqs: Mapping[str, TokenSeq] | None = None,
) -> BoundFigures:
    """``bounds_summary`` for a finished run: its manager's capacities, and the tokens it reused."""
    num_pages = sum(e.end_page - e.first_page for e in events if isinstance(e, Produce))
    if num_pages > MAX_BOUND_PAGES:
        return BoundFigures(
            bound_skipped=f"{num_pages} computed pages at page {manager.page_size} exceed "
            f"{MAX_BOUND_PAGES} (sim/bounds/summary.py): no bounds"
        )
    caps = manager.capacities()
    return bounds_summary(
        trace, events, manager.page_size, caps, manager.has_swa, manager.has_mamba, cached_tokens, seqs
    )


def served_ids(requests) -> set[str]:
    return set(requests["id"][served_mask(requests)])
