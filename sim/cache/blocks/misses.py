"""Why a vLLM hit lost what it lost, watched from the block pool's events (the ``why`` column,
``sim/run/why.py``): which (block key, group) entries were evicted, and which a request computed but the
retention interval left unhashed. At each admitted hit, the blocked range ``[hit, FULL's answer)`` is split
as the radix watcher splits it (``sim/cache/misses.py``): up to the deepest point with a Mamba state, the
cause of its missing SWA window; past it, the cause of the missing Mamba state. A key equal means a prefix
equal (``keys.py``), so "this block was there and was evicted" is exact, not a guess by position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress, groupby, repeat

from sim.cache.blocks import by_id, evict_pass
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import BlockHit, BlocksEvicted, BlocksSkipped, EventBus
from sim.cache.misses import MatchMiss
from sim.cache.reasons import (
    BLOCKED_OTHER,
    MAMBA_EVICTED,
    MAMBA_STATE,
    RETENTION,
    SWA_EVICTION,
    Range,
)
from sim.models import FULL, MAMBA, SWA

UNSORTED_CAP = 1 << 22  # skipped keys kept as tellings, not yet in sets (32 MiB of references)


@dataclass
class BlockMissTracker:
    layout: Layout
    pool: BlockPool
    events: EventBus
    misses: dict[str, MatchMiss] = field(default_factory=dict)
    # per group, the block keys that were cached and lost their hash; per set of groups told alike (a model's
    # SWA or Mamba groups), those computed and left unhashed by retention: sets of bytes, which the cycle
    # collector never tracks (a set of (key, group) tuples held millions of tracked tuples by the end of a
    # long trace), one for the groups of a kind rather than one per group (a set insert per key and group
    # was a sixth of a vLLM replay)
    evicted: dict[int, set] = field(default_factory=dict)
    skipped: dict[tuple[int, ...], set] = field(default_factory=dict)
    # the skipped keys told and not yet in ``skipped``, per set of groups: a telling is kept as its list and
    # added to the set only when a question reads that set (``_skipped_sets``). The SWA groups' set took 97% of
    # a vLLM replay's skipped keys and is read only where a hit's window is short of blocks (``_cause``):
    # mostly never. Equal: every read of ``skipped`` goes through ``_skipped_sets``, which adds them first.
    unsorted_skips: dict[tuple[int, ...], list[list]] = field(default_factory=dict)
    # their keys: past ``unsorted_cap`` every telling goes to its set (a key told twice is then held once)
    num_unsorted: int = 0
    unsorted_cap: int = UNSORTED_CAP

    def __post_init__(self):
        self.events.subscribe(BlocksEvicted, self._on_evicted)
        self.events.subscribe(BlocksSkipped, self._on_skipped)
        self.events.subscribe(BlockHit, self._on_hit)  # told only for an admitted request

    def _on_evicted(self, event: BlocksEvicted) -> None:
        """Each evicted key into its group's set: an allocation evicts runs of one group's keys (a request's
        blocks freed together), usually all of one group."""
        keys, groups = event.block_keys, event.groups
        if groups and groups.count(groups[0]) == len(groups):
            self._evicted_in(groups[0]).update(keys)
            return
        if evict_pass.ONE_PASS_EVICT and by_id.LOOPS:
            self._add_each(keys, groups)
            return
        if evict_pass.ONE_PASS_EVICT:  # a group's keys picked out in C, a pass a group (a few groups)
            for group in dict.fromkeys(groups):
                self._evicted_in(group).update(compress(keys, map(group.__eq__, groups)))
            return
        start = 0
        for group, run in groupby(groups):  # each run of one group's keys a slice of them
            end = start + len(list(run))
            self._evicted_in(group).update(keys[start:end])
            start = end

    def _add_each(self, keys: list, groups: list[int]) -> None:
        """Compiled: each key into its group's set, in one loop, the set looked up once a run of its group (the
        reference below makes a list and a slice a run)."""
        last, seen = -1, set()
        for at in range(len(keys)):
            if groups[at] != last:
                last = groups[at]
                seen = self._evicted_in(last)
            seen.add(keys[at])

    def _evicted_in(self, group: int) -> set:
        seen = self.evicted.get(group)
        if seen is None:
            seen = self.evicted[group] = set()
        return seen

    def _on_skipped(self, event: BlocksSkipped) -> None:
        self.unsorted_skips.setdefault(event.groups, []).append(event.keys)
        self.num_unsorted += len(event.keys)
        if self.num_unsorted > self.unsorted_cap:
            self._skipped_sets(sorted({group for told in self.unsorted_skips for group in told}))

    def _skipped_sets(self, groups: list[int]) -> list[set]:
        """The skipped sets of every set of groups told alike holding any of ``groups``, each with its keys
        told since it was last read added first."""
        unsorted = self.unsorted_skips
        for told in [told for told in unsorted if not set(told).isdisjoint(groups)]:
            seen = self.skipped.setdefault(told, set())
            for keys in unsorted.pop(told):
                seen.update(keys)
                self.num_unsorted -= len(keys)
        return [keys for told, keys in self.skipped.items() if not set(told).isdisjoint(groups)]

    def _was_evicted(self, key: object, group: int) -> bool:
        return key in self.evicted.get(group, ())

    def _was_skipped(self, key: object, group: int) -> bool:
        return any(key in keys for keys in self._skipped_sets([group]))

    def _on_hit(self, event: BlockHit) -> None:
        """A preempted request admitted again reports its first hit (``BlockCacheManager._start``): so
        does its miss."""
        if event.request_id not in self.misses:
            self.misses[event.request_id] = self.classify(event.chain, event.cached_len, event.full_len)

    # ---- classification at the hit -------------------------------------------------------------------
    def classify(self, chain: list, cached: int, full: int) -> MatchMiss:
        key = self.layout.key_index(FULL, full // self.layout.block_of(FULL))  # FULL's next block
        next_evicted = key < len(chain) and any(
            self._was_evicted(chain[key], g) for g in self.layout.groups_of(FULL)
        )
        return MatchMiss(self._blocked(chain, cached, full) if full > cached else (), next_evicted)

    def _blocked(self, chain: list, cached: int, full: int) -> tuple[Range, ...]:
        B, kinds = self.layout.block_size, self.layout.kinds
        points = range(cached + B, full + 1, B)  # every refused hit point past the hit
        stateful = [e for e in points if self._has_state(chain, e)] if MAMBA in kinds else list(points)
        ranges, start = [], cached
        if stateful:
            target = stateful[-1]
            cause = self._window_cause(chain, target) if SWA in kinds else BLOCKED_OTHER
            ranges.append((cached, target, cause))
            start = target
        if start < full:
            ranges += self._stateless(chain, start, full)
        return tuple(ranges)

    def _has_state(self, chain: list, end: int) -> bool:
        key = self.layout.key_index(MAMBA, end // self.layout.block_of(MAMBA) - 1)
        return all(self.pool.cached_in(chain[key], g) is not None for g in self.layout.groups_of(MAMBA))

    def _window_cause(self, chain: list, end: int) -> str:
        """Why the window before ``end`` is short: a block of it evicted, else one left unhashed."""
        B, need = self.layout.block_of(SWA), self.layout.swa_need  # a SWA group's blocks hold B tokens
        keys = [chain[self.layout.key_index(SWA, i)] for i in range(max(0, end // B - need), end // B)]
        missing = [
            (key, g)
            for key in keys
            for g in self.layout.groups_of(SWA)
            if self.pool.cached_in(key, g) is None
        ]
        return self._cause(missing, SWA_EVICTION, BLOCKED_OTHER)

    def _stateless(self, chain: list, start: int, full: int) -> list[Range]:
        """Past the deepest state: up to the deepest point whose state was evicted, ``mamba_evicted``; then up
        to the deepest one computed but not kept, ``retention``; the rest had no state computed (align mode
        computes one only at chunk ends, prefill checkpoints and the prompt's last block)."""
        B, ranges = self.layout.block_size, []
        for reason in (MAMBA_EVICTED, RETENTION):
            # the points past ``start`` are ``start + k B`` (k = 1 .. K), point k named by ``chain[start // B
            # + k - 1]``: a slice; the deepest point seen is the last key in any of the sets told the Mamba
            # groups' keys, looked up a set at a time in C
            keys = chain[start // B : start // B + len(range(start + B, full + 1, B))]
            num_points = max(map(_last_in, repeat(keys), self._sets_of(reason)), default=0)
            if num_points:
                ranges.append((start, start + num_points * B, reason))
                start += num_points * B
        return ranges + ([(start, full, MAMBA_STATE)] if start < full else [])

    def _sets_of(self, reason: str) -> list[set]:
        """The sets a Mamba group's key is looked up in for ``reason``: each group's evicted keys, or the
        skipped keys of every set of groups holding a Mamba group."""
        groups = self.layout.groups_of(MAMBA)
        if reason == MAMBA_EVICTED:
            return [self.evicted[g] for g in groups if g in self.evicted]
        return self._skipped_sets(groups)

    def _stateless_stepwise(self, chain: list, start: int, full: int) -> list[Range]:
        """``_stateless`` point by point (the reference its slices are tested against)."""
        B, ranges = self.layout.block_size, []
        for reason in (MAMBA_EVICTED, RETENTION):
            seen = self._was_evicted if reason == MAMBA_EVICTED else self._was_skipped
            ends = [
                e
                for e in range(start + B, full + 1, B)
                if any(seen(chain[e // B - 1], g) for g in self.layout.groups_of(MAMBA))
            ]
            if ends:
                ranges.append((start, ends[-1], reason))
                start = ends[-1]
        return ranges + ([(start, full, MAMBA_STATE)] if start < full else [])

    def _cause(self, missing: list, evicted_reason: str, otherwise: str) -> str:
        if any(self._was_evicted(key, g) for key, g in missing):
            return evicted_reason
        return RETENTION if any(self._was_skipped(key, g) for key, g in missing) else otherwise


def _last_in(keys: list, seen: set) -> int:
    """How many of ``keys`` up to and with the last one in ``seen`` (0: none in it)."""
    found = list(map(seen.__contains__, keys))
    return len(found) - found[::-1].index(True) if True in found else 0
