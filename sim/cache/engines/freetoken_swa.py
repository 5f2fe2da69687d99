"""FreeToken's SWA cache (``SWARadixCache``, ``CacheManager._cache_req_swa``), for FULL + SWA models.

Prefill: out-of-window SWA freed before every chunk, each chunk capped by the SWA the pool can back
(``PrefillAdder._add_one_req``); admission needs a window's worth of SWA (``_try_allocate_one``). The prompt's
commit inserts it, cuts the tree a window and ``_SWA_RETAIN_GAP`` back and locks from there. A finish inserts
the whole sequence, then (before issue #200's fix) tombstones the prompt head below ``prompt - W - 16``
(``trim_head_swa``) and re-matches the prompt, which re-stamps it.
"""

from __future__ import annotations

from sim.align import ceil_div, ceil_to, floor_to
from sim.cache import tree_runs
from sim.cache.components import SWA
from sim.cache.engines import freetoken_insert, freetoken_scans
from sim.cache.engines.freetoken_common import FreeTokenCommon
from sim.cache.engines.freetoken_frees import PoolFrees, frees_counted, tombstone_doomed
from sim.cache.engines.freetoken_insert import insert_swa
from sim.cache.engines.freetoken_links import trim_climb, walk_end
from sim.cache.matching import deepest_acceptable, deepest_acceptable_above
from sim.cache.node import Node
from sim.cache.ops import RadixOps
from sim.cache.request import RequestCache
from sim.cache.results import MatchResult, Refusal, new_match_result, new_refusal
from sim.cache.tree import RadixTree
from sim.compiled_core import mypyc_attr

RETAIN_GAP = 16  # _SWA_RETAIN_GAP: the lock and the finish trim keep W + 16 tokens
# False: the reference trim, ``match_prefix`` then a second walk down the same path
# (tests/test_freetoken_trim_walk.py compares them)
TRIM_REUSES_WALK = True
# False: the reference steps, a ``tombstone`` call (and event) per node the trim takes, the prompt's re-match
# walking from the root; True: one ``tombstone_run``, and the re-match walks on from the trim's walk
# (tests/test_freetoken_path_runs.py compares them)
TRIM_AS_RUN = True
# True: the tree's unlocked live SWA read from its counts (its live pages less the live nodes some request's window
# holds); False: the reference, a sum over every node of the tree (tests/test_freetoken_swa_scan.py)
AVAILABLE_FROM_COUNTS = True
# True: the admission's match walks from the remembered node and climbs the links for its node
# (``freetoken_links.walk_end``), and the finish trim takes its doomed nodes and its match in one climb
# (``trim_climb``); False: the reference, on the walks' lists (tests/test_freetoken_links_property.py)
MATCH_UP_LINKS = True
TRIM_UP_LINKS = True


@mypyc_attr(allow_interpreted_subclasses=True)
class SwaRules(FreeTokenCommon):
    def refresh_after_match(self, tree: RadixTree, path: list, node) -> None:
        self.clock.stamp_path(node)

    def match(self, tree: RadixTree, tokens, prompt_len: int) -> MatchResult:
        """``EngineRules.match``; its path is read only from its end (``stamp_path`` climbs from the node)."""
        r = self.resolved
        if not MATCH_UP_LINKS or r.window_slack or prompt_len <= 1:
            return super().match(tree, tokens, prompt_len)
        end, full_depth = walk_end(tree, tokens, floor_to(prompt_len - 1, self.page_size))
        best = deepest_acceptable_above(end, r.window, r.has_swa, r.has_mamba)
        node = best if best is not None else tree.root
        self.refresh_after_match(tree, [], node)
        return new_match_result(node.end, full_depth, node, None)

    # ---- admission and chunks ------------------------------------------------------------------------
    def admission_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        refusal = super().admission_refusal(manager, req)
        if refusal is not None or not self.resolved.has_swa:
            return refusal
        page, reserved = self.page_size, self.reserved_swa
        need = ceil_to(min(max(req.prompt_len - req.kv_len, 1), self.window) + 1, page)
        available = self.swa_available(manager, req, need + reserved) - reserved
        return new_refusal(SWA.pool_name, need, available) if available < need else None

    def cap_chunk(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int:
        """The SWA the pool can back this pass (less what earlier chunks of the pass were charged, plus what
        this request's own extend-free will release), charged per whole page."""
        if not self.resolved.has_swa:
            return chunk_len
        page, reserved = self.page_size, self.reserved_swa
        reclaim = max(
            0, floor_to(req.kv_len - self.window - page, page) - max(req.swa_frontier, req.prefix_len)
        )
        cost = ceil_to(req.kv_len + chunk_len, page) - ceil_to(req.kv_len, page)
        budget = self.swa_available(manager, req, cost - reclaim + reserved) + reclaim - reserved
        max_end = (ceil_div(req.kv_len, page) + max(budget, 0) // page) * page
        capped = min(chunk_len, max(max_end - req.kv_len, 0))
        if 0 < capped < req.prompt_len - req.kv_len:
            capped = floor_to(req.kv_len + capped, page) - req.kv_len
        self.reserved_swa += ceil_to(req.kv_len + capped, page) - ceil_to(req.kv_len, page)
        return capped

    def swa_available(self, manager: RadixOps, req: RequestCache, enough: int) -> int:
        """Free SWA tokens plus the tree's unlocked live ones (counted only when the free ones fall short);
        ``req``: the request asking, whose window is locked (admission asks before it joins the requests)."""
        free = manager.pools[SWA].num_free * self.page_size
        if free >= enough:
            return free
        tree = manager.tree
        if AVAILABLE_FROM_COUNTS:
            return free + tree.num_swa_pages * self.page_size - _held_live_swa(manager, req)
        return free + sum(
            n.end - n.start for n in tree.nodes() if n.swa_pages is not None and not n.swa_holders
        )

    def before_prefill_chunk(self, manager: RadixOps, req: RequestCache) -> None:
        if self.resolved.has_swa:
            manager.free_swa_below(req, self.frontier(req, req.kv_len))

    # ---- commit and finish ---------------------------------------------------------------------------
    def commit(self, manager: RadixOps, req: RequestCache, in_flight: int = 0) -> None:
        """``_cache_req_swa(finished=False)``: insert, cut a window + 16 back, re-match and lock there."""
        end = floor_to(req.kv_len + in_flight, self.page_size)
        tree = manager.tree
        node = (
            insert_swa(tree, req, end, self.clock, self.resolved.has_swa)
            if end > req.prefix_len
            else req.last_node
        )
        keep_from = floor_to(max(end - self.window - RETAIN_GAP, 0), self.page_size)
        if keep_from > 0:
            self.match_prefix(tree, req.tokens, keep_from)
        matched = self.match_prefix(tree, req.tokens, end)
        manager.relock(req, matched if matched.end == end else node)

    def finish(self, manager: RadixOps, req: RequestCache) -> None:
        end = floor_to(req.kv_len, self.page_size)
        if end > req.prefix_len:
            manager.relock(req, insert_swa(manager.tree, req, end, self.clock, self.resolved.has_swa))

    def after_release(self, manager: RadixOps, req: RequestCache) -> None:
        """The prompt head's trim (with a gap), then the prompt re-matched: its path newer than the tail."""
        tree, page = manager.tree, self.page_size
        prompt_end = floor_to(req.prompt_len, page)
        gap = self.knobs.finish_trim_gap
        if prompt_end > 0 and gap is not None and self.resolved.has_swa:
            keep_from = floor_to(max(prompt_end - self.window - gap, 0), page)
            if keep_from > 0 and TRIM_AS_RUN:
                self.trim_and_rematch(tree, req.tokens, keep_from, prompt_end)
            elif keep_from > 0:
                self.trim_head(tree, req.tokens, keep_from)
            if keep_from > 0 and TRIM_AS_RUN:
                self.compact_runs(tree, req.tokens, prompt_end)
                return
        if prompt_end > 0:
            self.match_prefix(tree, req.tokens, prompt_end)
            self.compact_runs(tree, req.tokens, prompt_end)

    def compact_runs(self, tree: RadixTree, tokens, prompt_end: int) -> None:
        """The finished prompt's path made runs where its nodes are alike (``tree_runs``), after its re-match,
        where the per-node passes have just made them so. Only where the pools count their frees (nobody reads
        a page id: a listed free's order is a node's); the reference steps make none, the walks' list steps
        included (their trim reads a run's pieces as one node: tests/test_freetoken_links_property.py)."""
        if (
            tree_runs.RUN_NODES
            and frees_counted(tree.full_pool)
            and tree.swa_pool.counts_frees
            and freetoken_insert.PASS_FROM_FRONTIER
            and freetoken_scans.SCANS_AS_TRIPLES
            and MATCH_UP_LINKS
            and TRIM_UP_LINKS
            and freetoken_insert.CLIMB_TO_LIVE
        ):
            end = tree.hints.deepest_known(tokens, prompt_end)  # where the re-match's walk ended
            if end is not None:
                tree_runs.compact(tree, end)

    def trim_and_rematch(self, tree: RadixTree, tokens, keep_from: int, prompt_end: int) -> None:
        """``trim_head(keep_from)`` then ``match_prefix(prompt_end)``, with one walk and one stamping pass:
        the re-match's walk passes the trim's path first, unchanged (a tombstone changes no structure), and
        restamps every node above where it stops; nothing reads a stamp in between, so the trim's match
        stamps only the nodes below that, afterwards (with its own, older, tick)."""
        if TRIM_UP_LINKS and not self.resolved.window_slack:
            self._trim_up_links(tree, tokens, keep_from, prompt_end)
            return
        path, _ = tree.walk(tokens, keep_from)
        r, clock = self.resolved, self.clock
        trim_best = deepest_acceptable(path, r.window - r.window_slack, r.has_swa, r.has_mamba)
        trim_node = trim_best if trim_best is not None else tree.root
        trim_base = clock.begin_path(trim_node)
        self.tombstone_head(tree, path, keep_from)
        start = path[-1] if path else None
        below, full_depth = tree.walk(tokens, prompt_end, start=start)
        matched = self.match_walked(tree, path + below, full_depth).tree_node
        clock.stamp_from(trim_node, trim_base, matched.end)

    def _trim_up_links(self, tree: RadixTree, tokens, keep_from: int, prompt_end: int) -> None:
        """``trim_and_rematch`` with no path listed: the walk's end found from the remembered node, the doomed
        nodes and the trim's match taken in one climb, the re-match climbing from where its walk ends."""
        r, clock = self.resolved, self.clock
        trim_end, _ = walk_end(tree, tokens, keep_from)
        doomed, trim_best = trim_climb(trim_end, r.window, r.has_mamba)
        trim_node = trim_best if trim_best is not None else tree.root
        trim_base = clock.begin_path(trim_node)
        frees = PoolFrees(tree)
        if doomed:
            tombstone_doomed(tree, doomed, frees)
        frees.flush()
        below, _ = tree.walk(tokens, prompt_end, start=trim_end)
        best = deepest_acceptable_above(below[-1] if below else trim_end, r.window, r.has_swa, r.has_mamba)
        matched = best if best is not None else tree.root
        self.refresh_after_match(tree, [], matched)
        clock.stamp_from(trim_node, trim_base, matched.end)

    def rematch(self, tree: RadixTree, tokens, end: int, node) -> None:
        """``match_prefix(end)`` where ``node`` (on ``tokens``' path) ends: the walk from the root ends on it
        without a split, so the match climbs from it instead (the walk's one other effect, its hint, made), and
        SWA's stamps (``stamp_path``) need no walk."""
        if not TRIM_AS_RUN or node.end != end:
            self.match_prefix(tree, tokens, end)
            return
        tree.hints.remember(tokens, node)
        r = self.resolved
        best = deepest_acceptable_above(node, r.window - r.window_slack, r.has_swa, r.has_mamba)
        self.refresh_after_match(tree, [], best if best is not None else tree.root)

    def trim_head(self, tree: RadixTree, tokens, keep_from: int) -> None:
        """``trim_head_swa``: tombstone every internal, live, unlocked node wholly below ``keep_from``."""
        if TRIM_REUSES_WALK:
            # ``match_prefix(keep_from)`` (``keep_from`` is page-aligned) on the walk it makes: the walk cuts
            # the tree at keep_from and the match only stamps, so that walk is the path the trim goes down
            path, full_depth = tree.walk(tokens, keep_from)
            self.match_walked(tree, path, full_depth)
        else:
            self.match_prefix(tree, tokens, keep_from)  # cuts the tree at keep_from
            path, _ = tree.walk(tokens, keep_from)
        self.tombstone_head(tree, path, keep_from)

    def tombstone_head(self, tree: RadixTree, path: list[Node], keep_from: int) -> None:
        """The trim's tombstones on its walk (``path``, from the root)."""
        frees = PoolFrees(tree)  # the pages of the nodes tombstoned, freed together (as one by one would)
        if TRIM_AS_RUN:  # a walk to keep_from ends at or above it: every node of ``path`` lies wholly below
            doomed = [n for n in path if n.swa_pages is not None and not n.swa_holders and n.children]
            if doomed:
                tombstone_doomed(tree, doomed, frees)
        else:
            held = frees.swa_held()
            for node in path:
                if node.end > keep_from:
                    break
                if node.swa_pages is not None and not node.swa_holders and node.children:
                    tree.tombstone(node, held)
        frees.flush()


def _held_live_swa(manager: RadixOps, asking: RequestCache) -> int:
    """Tokens of the nodes some request's window holds: each holder's lock set names them (a split's upper half
    joins its holders' sets, ``_follow_split``), a node held by several counted once. A held node is live: a
    window locks live nodes only, and nothing tombstones or deletes a node while it is held."""
    held: set[Node] = set(asking.locks.swa_nodes)
    for req in manager.requests.values():
        held.update(req.locks.swa_nodes)
    return sum(n.end - n.start for n in held)
