"""FreeToken's per-node frees held to the end of one insert or finish trim and made there, one list per pool.

A pool hands out the ids of the list freed last first, each list from its head (``Pool``): freeing the lists A
then B leaves it exactly as freeing the one list B + A does (the same free ids, handed out in the same order).
At page 1 an insert frees a list per node of the path it walks (the FULL copy of a span the tree already holds,
the SWA copy of a live node) and a finish trim one per node it tombstones. Late in a long run those paths run
to a hundred nodes and more (cut points collect on hot shared prefixes; the trim re-tombstones what the next
turn revives), and every later allocation walked those small lists one at a time. Held here, a pool gets one
list per operation, joined last-freed first. With ``BATCHED`` off every list is freed at once: the reference
the property test holds the batches to (tests/test_freetoken_batched_frees.py).
"""

from __future__ import annotations

from sim.cache.events import TombstoningRun, emit
from sim.cache.node import Node
from sim.cache.tree import RadixTree

BATCHED = True


class PoolFrees:
    """The FULL and SWA lists one operation frees, in order. FreeToken's pools are apart (``SeparatePools``):
    the order between the two pools' frees is nobody's business."""

    __slots__ = ("tree", "full_parts", "swa_parts")

    def __init__(self, tree: RadixTree):
        assert tree.swa_pool is not tree.full_pool
        self.tree = tree
        self.full_parts: list[list[int]] = []
        self.swa_parts: list[list[int]] = []

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
        ids: list = swa if swa[0] is not None else [p for p in swa if p is not None]
        if BATCHED:
            self.swa_parts.append(ids)
        else:
            self.tree.swa_pool.free(ids)

    def swa_held(self) -> list[list[int]] | None:
        """Where ``RadixTree.tombstone`` leaves a node's SWA pages (None: it frees them at once)."""
        return self.swa_parts if BATCHED else None

    def flush(self) -> None:
        _free_as_one(self.tree.full_pool, self.full_parts)
        _free_as_one(self.tree.swa_pool, self.swa_parts)


def tombstone_run(tree: RadixTree, nodes: list[Node], held: list[list[int]] | None) -> None:
    """``tree.tombstone(node, held)`` for each of ``nodes`` (all live), in order, announced as one
    ``TombstoningRun`` (the why watcher's one handler call, not a hundred)."""
    channel = tree.events.channel(TombstoningRun)
    if channel:
        emit(channel, TombstoningRun(nodes))
    num_freed = 0
    for node in nodes:
        pages = node.swa_pages
        assert pages is not None
        if held is None:
            tree.swa_pool.free(pages)
        else:
            held.append(pages)
        num_freed += len(pages)
        node.swa_pages = None
    tree.num_swa_pages -= num_freed


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
