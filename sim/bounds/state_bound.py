"""The optimal-admission bound for hybrids: a clairvoyant cache of MAMBA states (and SWA windows) under the
same budget.

A hit of request r at position P needs a MAMBA state at exactly P (and, with SWA, the window's last page
live), kept from the moment some request last computed or looked up position P on r's path until r's
lookup. So each counted lookup offers *options*: depth d (d pages, weight ``d * page`` tokens) with the
interval from the last *touch* of its d-th page before the lookup (``tau(d)``) to the lookup. Whatever a real
policy does, its hits pick at most one option per request, and at every lookup the options whose intervals
cover it are held by distinct states (a state two hits share is touched by the first, so the second's
interval starts there), so at most ``capacity`` of them: the best such choice, a linear programme, bounds
every policy. Any dual-feasible point bounds that programme; this file minimises the dual

    C * sum_e y_e + sum_r max(0, max_o (w_ro - sum_{e in I_ro} y_e)),   y >= 0,

first along ``y = lambda`` (golden section) and then by projected subgradient steps, and reports the best
value found (always a valid upper bound; how close to the optimum depends on the iterations).
"""

from __future__ import annotations

import math

import numpy as np

from sim.bounds.events import Lookup
from sim.bounds.page_paths import PagePaths
from sim.bounds.segment_trie import SegmentTrie

# True: the dual evaluated with fewer numpy calls to the same floats (``LeanDual``); False: ``DualBound``, the
# reference (tests/test_state_bound_lean.py holds both equal)
LEAN_DUAL = True
# True: a subgradient step that leaves ``y`` bit for bit where it was is not evaluated again, nor taken again until
# ``theta`` halves (``_descend``); False: every step evaluated (the reference; tests/test_state_bound_settled.py
# holds both equal)
SKIP_SETTLED_STEPS = True


class Options:
    """Per counted lookup, its Pareto options: (owner, weight, first covered lookup, last covered lookup)."""

    def __init__(self, owners, weights, first, last, num_points: int, requests: list[str]):
        self.owner = np.asarray(owners, dtype=np.int64)
        self.weight = np.asarray(weights, dtype=np.float64)
        self.first = np.asarray(first, dtype=np.int64)
        self.last = np.asarray(last, dtype=np.int64)
        self.num_points = num_points
        self.requests = requests

    @property
    def ideal(self) -> float:
        """Every request's deepest option taken (no budget)."""
        if not len(self.weight):
            return 0.0
        return float(np.maximum.reduceat(self.weight, _group_starts(self.owner)).sum())


def state_options(
    events: list, paths: SegmentTrie | PagePaths, nodes_of: list[list[int]] | None = None
) -> Options:
    """The options of every counted lookup (``nodes_of``: ``paths.pages`` of every event, if known). The
    nodes may be chains of pages (``SegmentTrie``): all pages of a node share their last touch, so only a
    node's deepest page can be an option."""
    if nodes_of is None:  # all first: the per-page trie grows as it goes
        nodes_of = [paths.pages(event) for event in events]
    last_touch = [-1] * paths.num_nodes  # event index -> below, the number of lookups up to it
    lookups_upto: list[int] = []
    owners: list[int] = []
    weights: list[int] = []
    first: list[int] = []
    last: list[int] = []
    requests: list[str] = []
    num_lookups = 0
    for index, (event, pages) in enumerate(zip(events, nodes_of, strict=True)):
        if isinstance(event, Lookup):
            if event.counted:
                found = _pareto(pages, last_touch, paths.depth)
                for depth, touched in found:
                    owners.append(len(requests))
                    weights.append(depth * paths.page_size)
                    first.append(lookups_upto[touched] if touched >= 0 else 0)
                    last.append(num_lookups)
                if found:
                    requests.append(event.request_id)
            num_lookups += 1
        lookups_upto.append(num_lookups)
        for page in pages:
            last_touch[page] = index
    return Options(owners, weights, first, last, num_lookups, requests)


def _pareto(nodes: list[int], last_touch: list[int], depth: list[int]) -> list[tuple[int, int]]:
    """(depth, last touch) for each depth no deeper option beats: deeper, or touched later."""
    found, latest = [], -2
    for node in reversed(nodes):
        touched = last_touch[node]
        if touched >= 0 and touched > latest:
            found.append((depth[node], touched))
            latest = touched
    return found


def _group_starts(owner: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])


class DualBound:
    def __init__(self, options: Options, capacity: int):
        self.o, self.capacity = options, capacity
        self.starts = _group_starts(options.owner) if len(options.weight) else np.zeros(0, dtype=np.int64)

    def value(self, y: np.ndarray) -> tuple[float, np.ndarray]:
        """The dual objective at ``y`` and the options each request would take there (-1: none)."""
        o = self.o
        prefix = np.concatenate(([0.0], np.cumsum(y)))
        slack = o.weight - (prefix[o.last + 1] - prefix[o.first])
        best = np.maximum.reduceat(slack, self.starts)
        taken = np.full(len(best), -1, dtype=np.int64)
        winners = np.flatnonzero((slack == best[o.owner]) & (best[o.owner] > 0))
        if len(winners):
            groups, at = np.unique(o.owner[winners], return_index=True)
            taken[groups] = winners[at]
        return float(self.capacity * y.sum() + np.clip(best, 0, None).sum()), taken

    def objective(self, y: np.ndarray) -> float:
        """The dual objective at ``y`` alone."""
        return self.value(y)[0]

    def subgradient(self, taken: np.ndarray) -> np.ndarray:
        chosen = taken[taken >= 0]
        size = self.o.num_points + 1
        diff = np.bincount(self.o.first[chosen], minlength=size) - np.bincount(
            self.o.last[chosen] + 1, minlength=size
        )
        return self.capacity - np.cumsum(diff)[:-1]


class LeanDual(DualBound):
    """``DualBound``'s evaluations in fewer numpy calls, the same floats and choices: the prefix sums written into
    one array (the same ``cumsum``), each option's group best indexed once, a group's first winner found where
    the winners' owners change (they are sorted, as the owners are: what ``np.unique``'s first index is), the
    objective alone without the winners (the golden-section search reads only it), the intervals' ends kept,
    ``np.maximum`` for ``np.clip`` (what ``clip`` with no upper limit calls)."""

    def __init__(self, options: Options, capacity: int):
        super().__init__(options, capacity)
        self._prefix = np.zeros(options.num_points + 1)
        self._end = options.last + 1

    def _slack(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each option's weight less its interval's sum of ``y``, and each group's best of them."""
        prefix = self._prefix
        np.cumsum(y, out=prefix[1:])
        slack = self.o.weight - (prefix[self._end] - prefix[self.o.first])
        return slack, np.maximum.reduceat(slack, self.starts)

    def objective(self, y: np.ndarray) -> float:
        best = self._slack(y)[1]
        return float(self.capacity * y.sum() + np.maximum(best, 0).sum())

    def value(self, y: np.ndarray) -> tuple[float, np.ndarray]:
        slack, best = self._slack(y)
        owner = self.o.owner
        group_best = best[owner]
        winners = np.flatnonzero((slack == group_best) & (group_best > 0))
        taken = np.full(len(best), -1, dtype=np.int64)
        if len(winners):
            groups = owner[winners]
            firsts = np.empty(len(groups), dtype=bool)
            firsts[0] = True
            np.not_equal(groups[1:], groups[:-1], out=firsts[1:])
            taken[groups[firsts]] = winners[firsts]
        return float(self.capacity * y.sum() + np.maximum(best, 0).sum()), taken


def state_bound(options: Options, capacity: int, iterations: int = 400) -> int:
    """An upper bound on the tokens any policy's hits can reach with ``capacity`` states (or pages)."""
    if not len(options.weight):
        return 0
    ideal = options.ideal
    if capacity <= 0:
        return 0
    dual = LeanDual(options, capacity) if LEAN_DUAL else DualBound(options, capacity)
    y, best = _best_constant(dual, options)
    value, taken = dual.value(y)
    best = _descend(dual, y, value, taken, min(best, value, ideal), iterations)
    return int(math.floor(best * (1 + 1e-12)))


def _descend(
    dual: DualBound, y: np.ndarray, value: float, taken: np.ndarray, best: float, iterations: int
) -> float:
    """The best value of ``iterations`` projected subgradient steps from ``y``. Where a step leaves ``y`` bit for bit
    where it was (``SKIP_SETTLED_STEPS``), the value and choices there are those already computed (functions of
    ``y`` alone), and every later step under the same ``theta`` is the same arithmetic on the same operands: none
    is taken again until ``theta`` halves. (At 1,000 requests of the conversation trace ``y`` settles after one
    step, for the other 399.)"""
    theta, stalled = 1.0, 0
    settled_under = None  # the ``theta`` whose step last left ``y`` where it was
    for _ in range(iterations):
        if theta != settled_under:
            g = dual.subgradient(taken)
            norm = float(g @ g)
            if norm == 0.0:
                break
            stepped = np.maximum(0.0, y - theta * 0.05 * value / norm * g)
            if SKIP_SETTLED_STEPS and stepped.tobytes() == y.tobytes():
                settled_under = theta
            else:
                y, settled_under = stepped, None
                value, taken = dual.value(y)
        if value < best - 1e-9 * best:
            best, stalled = value, 0
        else:
            stalled += 1
            if stalled >= 20:
                theta, stalled = theta / 2, 0
    return best


def _best_constant(dual: DualBound, options: Options) -> tuple[np.ndarray, float]:
    """The best ``y = lambda`` for all points (the dual is convex in lambda): golden-section search."""
    lengths = options.last - options.first + 1
    high = float((options.weight / lengths).max())
    ones = np.ones(options.num_points)
    low, ratio = 0.0, (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if dual.objective(a * ones) <= dual.objective(b * ones):
            high = b
        else:
            low = a
    lam = (low + high) / 2
    return lam * ones, dual.objective(lam * ones)
