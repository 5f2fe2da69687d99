"""FreeToken's GDN cache (``HybridRadixCache``, ``CacheManager._cache_req_hybrid``), for FULL + MAMBA models.

A request holds its running state and two ping-pong slots from admission. Its prompt gets one snapshot,
strictly inside its last chunk (``_build_track_metadata``: ``start + (extend - 1) // 64 * 64``), committed
with the prompt if it lies on a page (the tree takes the slot, and a fresh one replaces it). A finish first
commits a snapshot the request never committed, then donates its final state where the sequence ends on a
page; nothing else (no decode or branch checkpoints). ``SwaGdnRules`` is FreeToken's SWA rules on a
three-component model, which FreeToken itself cannot run: an extrapolation, documented as such. Its insert
(``insert_gdn``) is the shared one, stamped as ``_walk`` stamps (every node walked, then the new node newer).
"""

from __future__ import annotations

from sim.cache.components import MAMBA
from sim.cache.engines.freetoken_common import FreeTokenCommon
from sim.cache.engines.freetoken_insert import insert_swa
from sim.cache.engines.freetoken_swa import SwaRules
from sim.cache.engines.freetoken_tree import FreeTokenClock
from sim.cache.insert import attach_checkpoint, insert
from sim.cache.node import Node
from sim.cache.ops import RadixOps
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree
from sim.compiled_core import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)
class GdnRules(FreeTokenCommon):
    admission_states = 3  # the live slot and the ping-pong pair (_try_allocate_one)

    def refresh_after_match(self, tree: RadixTree, path: list, node) -> None:
        self.clock.stamp_walk(path)

    def align_chunk(self, req: RequestCache, chunk_len: int) -> int:
        """``prefill_chunk_align`` (a page): the end floored to a page, or the chunk as it is where no whole
        page fits the leftover budget (an unaligned end only costs this prompt its snapshot boundaries)."""
        aligned = super().align_chunk(req, chunk_len)
        return aligned if aligned > 0 else chunk_len

    def prefill_checkpoint(self, req: RequestCache, chunk_len: int) -> int | None:
        return prompt_snapshot(self, req, chunk_len)

    def commit(self, manager: RadixOps, req: RequestCache, in_flight: int = 0) -> None:
        commit_snapshot(self, manager, req)

    def finish(self, manager: RadixOps, req: RequestCache) -> None:
        finish_states(self, manager, req)

    def insert_state(
        self, manager: RadixOps, req: RequestCache, end: int, keep_duplicate: bool = False
    ) -> bool:
        """Insert ``[0, end)`` with the request's checkpoint at ``end``; True if the tree took the state."""
        node = insert_gdn(manager.tree, req, end, self.clock)
        taken = attach_checkpoint(manager.tree, req, node, end, keep_duplicate)
        manager.relock(req, node)  # after the state is on the node: the lock covers it
        return taken


@mypyc_attr(allow_interpreted_subclasses=True)
class SwaGdnRules(SwaRules):
    """GDN's states and commits, SWA's frees, admission, chunks and finish-time trim (not a FreeToken setup):
    the SWA rules with ``GdnRules``' state hooks (the same functions, as the compiled core takes single
    inheritance only)."""

    admission_states = 3

    def prefill_checkpoint(self, req: RequestCache, chunk_len: int) -> int | None:
        return prompt_snapshot(self, req, chunk_len)

    def commit(self, manager: RadixOps, req: RequestCache, in_flight: int = 0) -> None:
        commit_snapshot(self, manager, req)

    def finish(self, manager: RadixOps, req: RequestCache) -> None:
        finish_states(self, manager, req)

    def insert_state(
        self, manager: RadixOps, req: RequestCache, end: int, keep_duplicate: bool = False
    ) -> bool:
        node = insert_swa(manager.tree, req, end, self.clock, self.resolved.has_swa)
        taken = attach_checkpoint(manager.tree, req, node, end, keep_duplicate)
        manager.relock(req, node)
        return taken


def prompt_snapshot(rules: FreeTokenCommon, req: RequestCache, chunk_len: int) -> int | None:
    """The prompt's one snapshot, strictly inside its last chunk, if it lies on a page."""
    if req.kv_len + chunk_len < req.prompt_len:
        return None  # a continuation chunk's snapshot is never committed
    chunks = (chunk_len - 1) // rules.resolved.mamba_chunk
    position = req.kv_len + chunks * rules.resolved.mamba_chunk
    return position if chunks >= 1 and position % rules.page_size == 0 else None


def commit_snapshot(rules: FreeTokenCommon, manager: RadixOps, req: RequestCache) -> None:
    """``_cache_req_hybrid(finished=False)``: donate the snapshot, lock it, replace the slot."""
    if req.checkpoint is None:
        return
    end, slot = req.checkpoint
    taken = rules.insert_state(manager, req, end, keep_duplicate=True)  # locked at the node ending at `end`
    rules.rematch(manager.tree, req.tokens, end, req.last_node)  # FreeToken re-matches it to lock it: a stamp
    if not taken:
        req.checkpoint = None
        req.spare_states.append(slot)
    elif rules.reserve(manager, 0, 0, 1) is None:
        req.spare_states.append(manager.pools[MAMBA].alloc_one())


def finish_states(rules: FreeTokenCommon, manager: RadixOps, req: RequestCache) -> None:
    """``_cache_req_hybrid(finished=True)``: the pending snapshot, then the final state if on a page."""
    if req.checkpoint is not None and req.checkpoint[0] > req.prefix_len:
        rules.insert_state(manager, req, req.checkpoint[0])
    if req.kv_len % rules.page_size == 0 and req.kv_len > req.prefix_len:
        state = req.state
        assert state is not None  # a GDN request holds its running state until it is released
        req.checkpoint, req.state = (req.kv_len, state), None
        rules.insert_state(manager, req, req.kv_len)


def insert_gdn(tree: RadixTree, req: RequestCache, end: int, clock: FreeTokenClock) -> Node:
    """``HybridRadixCache.insert``: ``_walk`` stamps every node from the root, a new node is newer."""
    known = tree.walk(req.tokens, end)[1]  # the walk splits where the tree's path ends mid-node
    node = insert(tree, req, end, 0, False, attach=False)
    walked = node.path_from_root()
    if known < end:
        clock.stamp_walk(walked[:-1])
        clock.stamp_new(node)
    else:
        clock.stamp_walk(walked)
    return node
