"""vLLM 0.33.0's cache manager behind the simulator's cache interface (``sim/cache/interface.py``).

The lifecycle the scheduler drives is the radix manager's: admit -> (next_chunk_len -> prepare_prefill ->
complete_prefill)* -> (prepare_decode -> complete_decode)* -> finish. ``admit`` is vLLM's
``get_computed_blocks`` plus the admission gate and the touch of the hit; every ``prepare_*`` is one
``allocate_slots`` (release out-of-window and old state blocks on the processed tokens, allocate, hash); a
step the free queue cannot back is refused without allocating (vLLM preempts there; the scheduler retracts).
The rules and their vLLM functions: docs/vllm-rules.md.
"""

from __future__ import annotations

from sim.align import ceil_div
from sim.cache.blocks import steps
from sim.cache.blocks.admission import admission_need, hit_tables
from sim.cache.blocks.chunks import aligned_end, exports_checkpoint
from sim.cache.blocks.hit import longest_hit
from sim.cache.blocks.keys import BlockKeys, KeyChain
from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.blocks.layout import policy_layout
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.plain import PlainBlockDecodes
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.startup import check_config, in_flight_tokens, settle_max_model_len
from sim.cache.components import Component
from sim.cache.events import (
    Aborted,
    Admitted,
    BlockHit,
    BlocksSkipped,
    EventBus,
    Finished,
    emit,
)
from sim.cache.policy import Policy, own_knobs
from sim.cache.pools import PoolUsage
from sim.cache.resolve import resolve
from sim.cache.results import AdmitResult, ChunkPlan, FinishResult, MatchResult, Refusal
from sim.cache.sizing import PoolSizes
from sim.models import MAMBA, SWA, ModelSpec
from sim.tokens import TokenSeq

POOL = "vLLM block"  # the pool a Refusal names


class BlockCacheManager(PlainBlockDecodes):
    requeues_lone_request = True  # vLLM puts a preempted request back in its waiting queue

    def __init__(self, model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus | None = None):
        self.policy, self.model = policy, model
        self.events = events if events is not None else EventBus()
        self.resolved = resolve(policy, model)
        self.knobs = knobs = own_knobs(policy, VllmKnobs)
        self.layout = policy_layout(model, policy)
        self.page_size, self.window = self.layout.block_size, self.layout.window
        self.has_swa, self.has_mamba = SWA in self.layout.kinds, MAMBA in self.layout.kinds
        self.async_scheduling = knobs.async_scheduling
        check_config(self.layout, policy, model)
        self.max_model_len = settle_max_model_len(self.layout, sizes.blocks, policy)
        self.num_blocks = sizes.blocks
        self.pool = BlockPool(sizes.blocks, self.layout.group_kinds, self.events)
        self._on_hit, self._on_skip = self.events.channel(BlockHit), self.events.channel(BlocksSkipped)
        self.keys = BlockKeys(self.page_size)
        self.requests: dict[str, BlockRequest] = {}
        self._waiting_chains: dict[str, KeyChain] = {}
        self._preempted: dict[str, MatchResult] = {}  # the hit each preempted request reported

    # ---- admission ----------------------------------------------------------------------------------
    def admit(self, request_id: str, tokens: TokenSeq, prompt_len: int) -> AdmitResult | Refusal:
        if request_id in self.requests:
            raise ValueError(f"request {request_id!r} is already admitted")
        # a request refused admission is asked again every step: its keys are kept until it is admitted
        chain = self.keys.chain(
            tokens, (prompt_len - 1) // self.page_size, self._waiting_chains.get(request_id)
        )
        past_state = self.policy.fault == "vllm-hit-past-state"  # a negative control
        hit = longest_hit(self.layout, self.pool, chain.keys, prompt_len, past_state)
        if not self.knobs.junction:  # the scheduler before vLLM #37898
            hit = hit._replace(junction=0)
        tables = hit_tables(self.layout, self.pool, chain.keys, hit.tokens, past_state)
        swa_cap = (
            ceil_div(min(self.window - 1 + in_flight_tokens(self.policy), self.max_model_len), self.page_size)
            + 1
        )
        needed = admission_need(self.layout, self.pool, tables, prompt_len, swa_cap)
        if needed > self.pool.num_free:
            self._waiting_chains[request_id] = chain
            return Refusal(POOL, needed, self.pool.num_free)
        self._waiting_chains.pop(request_id, None)
        if self._on_hit:
            emit(self._on_hit, BlockHit(request_id, chain.keys, hit.tokens, hit.full_tokens))
        return self._start(
            BlockRequest(
                request_id,
                tokens,
                prompt_len,
                MatchResult(hit.tokens, hit.full_tokens, None),
                hit,
                chain,
                tables,
                [len(t) for t in tables],
                [0] * len(tables),
                kv_len=hit.tokens,
            )
        )

    def _start(self, req: BlockRequest) -> AdmitResult:
        """Touch the hit's blocks and run the request. vLLM reports the first admission's hit
        (``PrefillStats`` is set once): a preempted request admitted again keeps reporting it."""
        for group, table in enumerate(req.tables):
            self.pool.touch(table, group)
        self.requests[req.request_id] = req
        req.match = self._preempted.pop(req.request_id, req.match)  # kept through any later preemption
        result = AdmitResult(req.match, None)
        self.events.publish(Admitted(req.request_id, result.match.cached_len))
        return result

    def next_chunk_len(self, request_id: str, budget: int) -> int:
        """``min(remaining, budget)``, cut where align-mode Mamba must stop (``_mamba_block_aligned_split``)."""
        req = self.requests[request_id]
        if budget <= 0:
            return 0
        start = req.kv_len
        end = start + min(req.prompt_len - start, budget)
        if self.has_mamba:
            end = aligned_end(
                self.page_size,
                start,
                end,
                req.prompt_len,
                req.junction,
                self.policy.chunked_prefill_size,
                bool(self.layout.checkpoint_blocks),
            )
        return max(end - start, 0)

    # ---- steps --------------------------------------------------------------------------------------
    def prepare_prefill(self, request_id: str, chunk_len: int, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        start, end = req.kv_len, req.kv_len + chunk_len
        if chunk_len <= 0 or end > req.prompt_len:
            raise ValueError(f"{request_id}: bad prefill chunk of {chunk_len} at {start}/{req.prompt_len}")
        every_chunk = self.knobs.retention_interval != 0
        checkpoint = bool(self.layout.checkpoint_blocks) and exports_checkpoint(
            self.page_size, start, end, req.prompt_len, every_chunk
        )
        return self._step(req, end, checkpoint, iteration)

    def complete_prefill(self, request_id: str, chunk_len: int) -> None:
        self.requests[request_id].kv_len += chunk_len

    def prepare_decode(self, request_id: str, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        return self._step(req, req.kv_len + 1, False, iteration)

    def complete_decode(self, request_id: str) -> None:
        req = self.requests[request_id]
        req.kv_len += 1
        req.decode_steps += 1

    def _step(self, req: BlockRequest, end: int, checkpoint: bool, iteration: int) -> ChunkPlan | Refusal:
        """``allocate_slots`` for the step ``[kv_len, end)``."""
        early = self.policy.fault == "vllm-early-free"  # a negative control
        steps.release_skipped(
            self.layout, self.pool, req, req.processed(iteration, self.async_scheduling), early
        )
        plan = steps.blocks_to_allocate(self.layout, req, end, checkpoint)
        needed = sum(count for _, count in plan)
        if needed > self.pool.num_free:
            return Refusal(POOL, needed, self.pool.num_free)
        steps.allocate(self.pool, req, plan)
        steps.cache_blocks(
            self.layout,
            self.pool,
            self.keys,
            req,
            end,
            checkpoint,
            self.knobs.retention_interval,
            self._on_skip,
        )
        req.record_step(iteration, end - req.kv_len)
        return ChunkPlan(req.request_id, req.kv_len, end, None)

    # ---- finish -------------------------------------------------------------------------------------
    def finish(self, request_id: str) -> FinishResult:
        req = self.requests.pop(request_id)
        steps.free_request(self.pool, req)
        result = FinishResult(inserted_len=req.kv_len // self.page_size * self.page_size)
        self.events.publish(Finished(request_id, result.inserted_len))
        return result

    def abort(self, request_id: str) -> None:
        """A preemption: the request's blocks are freed as at a finish (what was hashed stays cached); if it
        is admitted again, it still reports its first admission's hit."""
        req = self.requests.pop(request_id)
        self._preempted.setdefault(request_id, req.match)
        steps.free_request(self.pool, req)
        self.events.publish(Aborted(request_id))

    # ---- views --------------------------------------------------------------------------------------
    def usage(self) -> dict[Component, PoolUsage]:
        """Per group kind, in blocks of the one pool: free (unhashed, shared by all), held by running
        requests, cached in the free queue (hashed, evictable)."""
        pool = self.pool
        empty = pool.num_free - sum(pool.cached_free.values())
        return {
            comp: PoolUsage(
                empty, pool.held.get(comp.layer_kind, 0), pool.cached_free.get(comp.layer_kind, 0)
            )
            for comp in Component
        }

    def capacities(self) -> dict[Component, int]:
        """The whole pool for every group kind the model has: each could fill it alone."""
        held = (True, self.has_swa, self.has_mamba)
        return {comp: self.num_blocks if on else 0 for comp, on in zip(Component, held, strict=True)}

    def num_evictions(self) -> dict[Component, int]:
        return {comp: self.pool.num_evictions.get(comp.layer_kind, 0) for comp in Component}

    def discard(self) -> None:
        """Nothing to unlink: the block pool holds no cycles."""

    def watch_misses(self) -> BlockMissTracker:
        """Why each hit lost what it lost: evictions and retention, from the pool's events."""
        return BlockMissTracker(self.layout, self.pool, self.events)

    def never_fits(self, prompt_len: int, output_len: int) -> str | None:
        """Why vLLM would never run a request of this size (it is longer than max_model_len), or None."""
        if prompt_len + output_len > self.max_model_len:
            return (
                f"prompt + output = {prompt_len + output_len} tokens exceeds vLLM's max_model_len "
                f"{self.max_model_len}"
            )
        return None

    def check_integrity(self) -> None:
        from sim.cache.blocks.integrity import check_integrity

        check_integrity(self)
