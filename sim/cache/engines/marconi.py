"""Marconi (MLSys'25, ``ruipeterpan/marconi``): selective admission of MAMBA states and FLOP-aware eviction.

Admission (``branch+last``): a request leaves at most two states to the tree. One at the branch-off point
its speculative insertion finds (the FULL match runs deeper than the last state on its path: a second
request sharing a prefix splits the first one's edge there), taken by a two-pass prefill (the chunk stops
at the branch) and inserted at once; so a shared prefix is reusable from its third sighting. One after its
last decoded token (``floor(prompt + output - 1)`` to a page), inserted at finish with all its KV.
``every-page`` is the paper's vLLM+ baseline: a state at every page (32-token block), each inserted as it
is taken. SWA, where the model has it, is never freed while cached: Marconi keeps KV for every cached
token. A cache without MAMBA state (a FULL or FULL + SWA model) keeps every whole page a request computed,
with the same eviction over leaves: the paper's pure-Transformer point. Eviction and recency:
``marconi_evict.py``; alpha: ``marconi_tuner.py``; one byte budget
(``--cache-bytes``): ``sim/cache/byte_budget.py``, else the engine's pools apart.

Marconi's system sits on SGLang, so Marconi and SGLang+ run SGLang's loop and answer its budget with SGLang's
own gates (``SGLangAdmission``): a request holds SGLang's three MAMBA slots (its running state and two track
slots, which its branch and last states use), and a two-pass cut makes it SGLang's one chunked request,
which ends the pass. Under a byte budget the budget's counts are bytes, expressed in tokens of KV (FULL and
SWA together): free = what the budget takes now, evictable = the unlocked tree pages and states, and a
request's slots charged to its admission. Without one, evictable SWA is the SWA of nodes no running request's
path locks: Marconi frees SWA only by deleting nodes, so a window's lock is not what bounds it. vLLM+ runs the
default loop with none of SGLang's gates (``marconi_vllm.py``).
"""

from __future__ import annotations

from sim.align import floor_to
from sim.cache.byte_budget import ByteBudget
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi_evict import MarconiEvictor
from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.engines.marconi_knobs import MarconiKnobs
from sim.cache.engines.marconi_recency import Recency
from sim.cache.engines.marconi_tuner import AlphaTuner
from sim.cache.engines.sglang_admission import SGLangAdmission
from sim.cache.engines.sglang_locked import swa_pages_on_locked_paths
from sim.cache.events import EventBus
from sim.cache.eviction import NoEviction
from sim.cache.ops import RadixOps
from sim.cache.policy import own_knobs
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.results import Refusal
from sim.cache.topology import SeparatePools
from sim.cache.tree import RadixTree
from sim.compiled_core import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)
class MarconiRules(SGLangAdmission):
    name = "marconi"
    supports_byte_budget = True
    admission_states = 3  # SGLang's slots: the running state and two track slots (extra_buffer)
    # Marconi's evictor scans or keeps its own heap (the tree's releases are ignored: ``NoEviction``), and a
    # cached node keeps its SWA until it is deleted (no tombstones to revive inside a window): vLLM+ relocks
    # at every 32-token chunk, one node down
    slides_window_locks = True

    @classmethod
    def check(cls, resolved: Resolved) -> None:
        if resolved.policy.chunked_prefill_size < resolved.page_size:
            raise ValueError(
                f"chunked_prefill_size {resolved.policy.chunked_prefill_size} is below page_size "
                f"{resolved.page_size}: no non-final prefill chunk could be scheduled"
            )

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        self.knobs = knobs = own_knobs(resolved.policy, MarconiKnobs)
        self.has_mamba = resolved.has_mamba
        self.every_page = knobs.marconi_checkpoints == "every-page" and self.has_mamba
        self.path_refresh = knobs.marconi_eviction == "lru"
        self.recency = Recency(whole_paths=self.path_refresh)
        self.tuner = AlphaTuner(resolved.policy)
        self._evictor: MarconiEvictor | None = None
        self._cost: NodeCost | None = None
        self._bytes: ByteBudget | None = None

    # ---- layout, eviction --------------------------------------------------------------------------
    def topology(self, sizes, has_swa: bool, has_mamba: bool, events: EventBus):
        if sizes.budget_bytes is None:
            return SeparatePools(sizes, has_swa, has_mamba, events)
        self._bytes = ByteBudget(sizes, has_swa, has_mamba, events)
        self.swa_budget = False  # SWA is paid for in the same bytes as FULL: no budget of its own
        return self._bytes

    def free_tokens(self, manager: RadixOps, swa: bool) -> int:
        """A byte budget: the tokens of KV (FULL and SWA together) it takes now."""
        if self._bytes is None:
            return super().free_tokens(manager, swa)
        return self._bytes.kv_room(self.resolved.has_swa) * self.page_size

    def admission_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        """SGLang's ``add_one_req``; under a byte budget the request's MAMBA slots come out of the same bytes,
        so the check counts them as the tokens of KV they displace (once allocated, the free bytes show them)."""
        if self._bytes is None:
            return super().admission_refusal(manager, req)
        states = self.admission_states if self.resolved.has_mamba else 0
        tokens = -self._as_kv_tokens(-states * self._bytes.unit[MAMBA])  # rounded up
        b = self.pass_budget
        self.pass_budget = b._replace(total=b.total + tokens, current=b.current + tokens)
        refusal = super().admission_refusal(manager, req)
        b = self.pass_budget
        self.pass_budget = b._replace(total=b.total - tokens, current=b.current - tokens)
        return refusal

    def evictable_tokens(self, manager: RadixOps, req: RequestCache | None, swa: bool) -> int:
        """SWA: the pages of nodes no holder's path locks (a cached node keeps its SWA until it is deleted, so
        a window's lock is not what bounds it); a byte budget: the unlocked tree pages, and its unlocked states
        as the tokens of KV they weigh."""
        if swa:
            return (manager.tree.num_swa_pages - swa_pages_on_locked_paths(manager, req)) * self.page_size
        pages = super().evictable_tokens(manager, req, swa)
        if self._bytes is None or not self.resolved.has_mamba:
            return pages
        holders = [*manager.requests.values(), *([req] if req is not None else [])]
        locked = {n.id for h in holders for n in h.last_node.path_from_root() if n.state is not None}
        return pages + self._as_kv_tokens((manager.tree.num_states - len(locked)) * self._bytes.unit[MAMBA])

    def _as_kv_tokens(self, num_bytes: int) -> int:
        """Bytes of the budget as the tokens of KV (FULL and SWA together) they hold, rounded down."""
        assert self._bytes is not None, "only a byte budget weighs states against KV"
        units = self._bytes.unit
        return num_bytes * self.page_size // (units[FULL] + units[SWA])

    def evict_for_pages(self, manager: RadixOps, num_pages: int) -> bool:
        """A byte budget: the FULL and SWA pages evicted for together (one shortfall in bytes)."""
        if self._bytes is None:
            return super().evict_for_pages(manager, num_pages)
        return self.reserve(manager, num_pages, num_pages if self.resolved.has_swa else 0, 0) is None

    def eviction(self):
        return NoEviction()  # Marconi's evictor picks the victims (marconi_evict.py; LRU: marconi_lru.py)

    def cost(self, manager: RadixOps) -> NodeCost:
        if self._cost is None:
            self._cost = NodeCost(manager.model, self.window, self.knobs.marconi_follows)
        return self._cost

    def evictor(self, manager: RadixOps) -> MarconiEvictor:
        if self._evictor is None:
            flop_aware = self.knobs.marconi_eviction == "flop-aware"
            code_counting = flop_aware and self.knobs.marconi_follows == "code"
            self._evictor = MarconiEvictor(
                self.cost(manager), self.recency, flop_aware, code_counting, self.has_mamba
            )
        self._evictor.alpha = self.tuner.alpha
        return self._evictor

    def reserve(self, manager: RadixOps, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        evictor = self.evictor(manager)
        if self.tuner.done:  # no tuning waits for the first eviction (the tuner's own caches): none to count
            return evictor.reserve(manager, full_pages, swa_pages, states)
        evictions = sum(manager.tree.num_evictions.values())
        refusal = evictor.reserve(manager, full_pages, swa_pages, states)
        if sum(manager.tree.num_evictions.values()) > evictions:
            self.tuner.first_eviction()
        return refusal

    # ---- admission ----------------------------------------------------------------------------------
    def refresh_after_match(self, tree: RadixTree, path: list, node) -> None:
        """Marconi refreshes only the node a hit resumes from; SGLang+ / vLLM+ every node the walk visits."""
        self.recency.tick()
        if self.path_refresh:
            if path:  # the walk from the root: a path down to its last node
                self.recency.stamp_down_to(path[-1])
        elif node is not tree.root:
            self.recency.stamp(node)

    def after_admit(self, manager: RadixOps, req: RequestCache) -> None:
        self.tuner.admitted(manager, self.cost(manager), req.request_id, req.tokens, req.prompt_len)

    def branch(self, req: RequestCache) -> int | None:
        """The branch-off point not yet in the tree: where the FULL match outruns the last state."""
        if self.every_page or not self.has_mamba:
            return None
        depth = req.match.full_depth
        return depth if depth > req.cached_len and depth > req.prefix_len else None

    def last_position(self, req: RequestCache) -> int:
        """Where the state after the last decoded token lands (the last sampled token is never computed)."""
        return floor_to(len(req.tokens) - 1, self.page_size)

    def chunk_len(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int:
        """SGLang's cap and charge on the two-pass chunk; a cut chunk makes the request SGLang's chunked
        request, and SGLang has one at a time: no chunk tokens are left to this pass."""
        cut = self.two_pass(req, chunk_len)
        allowed = super().chunk_len(manager, req, cut)
        if cut < chunk_len and allowed > 0:
            self.pass_budget = self.pass_budget._replace(chunk=0)
        return allowed

    def two_pass(self, req: RequestCache, chunk_len: int) -> int:
        """Two-pass prefill: a chunk stops at the branch-off point (or, vLLM+, at the next page)."""
        stop = floor_to(req.kv_len, self.page_size) + self.page_size if self.every_page else self.branch(req)
        if stop is not None and req.kv_len < stop < req.kv_len + chunk_len:
            return stop - req.kv_len
        return chunk_len

    # ---- prefill and decode checkpoints ------------------------------------------------------------
    def prefill_checkpoint(self, req: RequestCache, chunk_len: int) -> int | None:
        end = req.kv_len + chunk_len
        if not self.has_mamba:
            return None
        if self.every_page:
            return end if end % self.page_size == 0 else None
        branch, last = self.branch(req), self.last_position(req)
        if branch is not None and branch == end:
            return branch
        return last if req.kv_len < last <= end else None

    def after_prefill_chunk(self, manager: RadixOps, req: RequestCache, is_last: bool) -> None:
        checkpoint = req.checkpoint
        if checkpoint is not None and (self.every_page or checkpoint[0] != self.last_position(req)):
            self.insert(manager, req, checkpoint[0])

    def decode_checkpoint(self, req: RequestCache) -> int | None:
        position = req.kv_len + 1
        if self.every_page:
            return position if position % self.page_size == 0 else None
        return position if self.has_mamba and position == self.last_position(req) else None

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        if not self.has_mamba:
            return 1 << 62
        if self.every_page:  # up to the next page's state (the one before waits for the finish's insert)
            return -(req.kv_len + 1) % self.page_size
        last = self.last_position(req)
        return last - req.kv_len - 1 if last > req.kv_len else 1 << 62

    # ---- commit -------------------------------------------------------------------------------------
    def finish(self, manager: RadixOps, req: RequestCache) -> None:
        end = self.insert_len(req)  # the last checkpoint; without MAMBA, every whole page computed
        if end is not None:
            self.insert(manager, req, end)

    def insert(self, manager: RadixOps, req: RequestCache, end: int) -> None:
        if end <= req.prefix_len:
            return
        self.recency.tick(2)  # Marconi's insert runs a speculative match first: two ticks
        manager.insert(req, end)
        self.stamp_inserted(req.last_node)

    def stamp_inserted(self, node) -> None:
        """An insert's recency: the path down to ``node``, the node ending at the insert's end."""
        if self.path_refresh:
            self.recency.stamp_down_to(node)
        else:
            self.recency.stamp_path(node.path_from_root(), every=False)
