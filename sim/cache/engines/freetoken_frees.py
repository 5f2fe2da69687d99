"""FreeToken's per-node frees held to the end of one insert or finish trim and made there, one list per pool.

A pool hands out the ids of the list freed last first, each list from its head (``Pool``): freeing the lists A
then B leaves it exactly as freeing the one list B + A does (the same free ids, handed out in the same order).
At page 1 an insert frees a list per node of the path it walks (the FULL copy of a span the tree already holds,
the SWA copy of a live node) and a finish trim one per node it tombstones. Late in a long run those paths run
to a hundred nodes and more (cut points collect on hot shared prefixes; the trim re-tombstones what the next
turn revives), and every later allocation walked those small lists one at a time. Held here, a pool gets one
list per operation, joined last-freed first. With ``BATCHED`` off every list is freed at once: the reference
the property test holds the batches to (tests/test_freetoken_batched_frees.py).

Where a pool only counts its frees (``Pool.counts_frees``: a replay's anonymous pools, whose ids are all one
and whose frees nobody watches), what an operation frees there is counted instead of listed: no slice, join or
drop of a list of one shared id per token. With ``COUNT_ANONYMOUS`` off every free is listed as above: the
reference tests/test_freetoken_counted_frees.py holds the counts to.
"""

from __future__ import annotations

from typing import cast

from sim.cache.events import TombstoningRun, emit
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree

BATCHED = True
COUNT_ANONYMOUS = True
# True: a trim's run of tombstones on a pool that only counts its frees adds its pages to the count as it goes;
# False: it lists them to be counted at the flush, the reference (tests/test_lean_path_loops.py)
COUNT_RUNS = True


def frees_counted(pool: Pool) -> bool:
    """Whether an operation's frees from ``pool`` are counted (``PoolFrees.num_*``), not listed."""
    return COUNT_ANONYMOUS and BATCHED and pool.counts_frees


class PoolFrees:
    """The FULL and SWA lists one operation frees, in order. FreeToken's pools are apart (``SeparatePools``):
    the order between the two pools' frees is nobody's business."""

    __slots__ = ("tree", "full_parts", "swa_parts", "full_counted", "swa_counted", "num_full", "num_swa")

    def __init__(self, tree: RadixTree):
        assert tree.swa_pool is not tree.full_pool
        self.tree = tree
        self.full_parts: list[list[int]] = []
        self.swa_parts: list[list[int]] = []
        # per pool: its frees are counted (``num_*``), not listed
        self.full_counted = frees_counted(tree.full_pool)
        self.swa_counted = frees_counted(tree.swa_pool)
        self.num_full = self.num_swa = 0

    def full_spans(self, full: list[int], cuts: list[int]) -> None:
        """Free ``full[cuts[0]:cuts[1]]``, then ``full[cuts[1]:cuts[2]]``, ... (a path's nodes, top first)."""
        if not BATCHED:
            for i in range(len(cuts) - 1):
                if cuts[i] < cuts[i + 1]:
                    self.tree.full_pool.free(full[cuts[i] : cuts[i + 1]])
            return
        if len(cuts) == 2:
            self.full_parts.append(full[cuts[0] : cuts[1]])
            return
        ids: list[int] = []
        for i in range(len(cuts) - 2, -1, -1):  # joined last first, as the pool hands them out
            ids += full[cuts[i] : cuts[i + 1]]
        self.full_parts.append(ids)

    def full_path(self, full: list[int], path: list[Node], base: int) -> None:
        """``full_spans`` of the walked nodes' spans (``path``, top first; ``full`` begins at ``base``), each
        span's page indices read from its node."""
        page = self.tree.page_size
        hi = (path[-1].end - base) // page
        if self.full_counted:  # the spans are consecutive: together, full[lo:hi] from the first's start
            lo = (path[0].start - base) // page
            assert 0 <= lo <= hi <= len(full)
            self.num_full += hi - lo
            return
        if not BATCHED or len(path) == 1:
            self.full_spans(full, [(node.start - base) // page for node in path] + [hi])
            return
        ids: list[int] = []
        for node in reversed(path):  # joined last first, as the pool hands them out
            lo = (node.start - base) // page
            ids += full[lo:hi]
            hi = lo
        self.full_parts.append(ids)

    def swa_live(self, swa: list[int | None]) -> None:
        """``swa``: a run of a request's own SWA pages, whose None entries (already freed) form a prefix."""
        if not swa or swa[-1] is None:  # empty, or every entry is None
            return
        if self.swa_counted:
            self.swa_live_span(swa, 0, len(swa))
            return
        ids: list = swa if swa[0] is not None else [p for p in swa if p is not None]
        if BATCHED:
            self.swa_parts.append(ids)
        else:
            self.tree.swa_pool.free(ids)

    def swa_live_span(self, swa: list[int | None], lo: int, hi: int) -> None:
        """``swa_live(swa[lo:hi])`` (``0 <= lo``, ``hi <= len(swa)``), without the slice where it is counted."""
        if not self.swa_counted:
            self.swa_live(swa[lo:hi])
            return
        if lo >= hi or swa[hi - 1] is None:
            return
        while swa[lo] is None:  # the freed entries, a prefix
            lo += 1
        self.num_swa += hi - lo

    def swa_held(self) -> list[list[int]] | None:
        """Where ``RadixTree.tombstone`` leaves a node's SWA pages (None: it frees them at once)."""
        return self.swa_parts if BATCHED else None

    def flush(self) -> None:
        tree = self.tree
        if self.full_counted:
            _count_as_one(tree.full_pool, self.full_parts, self.num_full)
        else:
            _free_as_one(tree.full_pool, self.full_parts)
        if self.swa_counted:
            _count_as_one(tree.swa_pool, self.swa_parts, self.num_swa)
        else:
            _free_as_one(tree.swa_pool, self.swa_parts)
        self.num_full = self.num_swa = 0


def tombstone_run(
    tree: RadixTree, nodes: list[Node], held: list[list[int]] | None, count_only: bool = False
) -> int:
    """``tree.tombstone(node, held)`` for each of ``nodes`` (all live), in order, announced as one
    ``TombstoningRun`` (the why watcher's one handler call, not a hundred). ``count_only``: the pages go nowhere,
    the caller counts them (a pool that only counts its frees). Returns the pages taken."""
    channel = tree.events.channel(TombstoningRun)
    if channel:
        emit(channel, TombstoningRun(nodes))
    num_freed = 0
    for node in nodes:
        pages = node.swa_pages
        assert pages is not None
        if count_only:
            pass
        elif held is None:
            tree.swa_pool.free(pages)
        else:
            held.append(cast("list[int]", pages))  # FreeToken's trees own their lists: never counted
        num_freed += len(pages)
        node.swa_pages = None
    tree.num_swa_pages -= num_freed
    return num_freed


def tombstone_doomed(tree: RadixTree, nodes: list[Node], frees: PoolFrees) -> None:
    """The trim's ``tombstone_run``, its SWA pages held in ``frees`` (or counted there, to be counted out of
    the pool at the flush: the same count, taken at once)."""
    if COUNT_RUNS and frees.swa_counted:
        frees.num_swa += tombstone_run(tree, nodes, None, count_only=True)
    else:
        tombstone_run(tree, nodes, frees.swa_held())


def _free_as_one(pool, parts: list[list[int]]) -> None:
    if not parts:
        return
    if len(parts) == 1:
        pool.free(parts[0])
    else:
        ids: list[int] = []
        for part in reversed(parts):  # the last freed is handed out first
            ids += part
        pool.free(ids)
    parts.clear()


def _count_as_one(pool, parts: list[list[int]], num_counted: int) -> None:
    """``_free_as_one`` for a pool that only counts its frees: the parts' ids and the counted ones."""
    for part in parts:
        num_counted += len(part)
    if num_counted:
        pool.free_count(num_counted)
    parts.clear()
