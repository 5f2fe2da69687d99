"""vLLM 0.33.0's cache manager behind the simulator's cache interface (``sim/cache/interface.py``).

The lifecycle the scheduler drives is the radix manager's: admit -> (next_chunk_len -> prepare_prefill ->
complete_prefill)* -> (prepare_decode -> complete_decode)* -> finish. ``admit`` is vLLM's
``get_computed_blocks`` plus the admission gate and the touch of the hit; every ``prepare_*`` is one
``allocate_slots`` (release out-of-window and old state blocks on the processed tokens, allocate, hash); a
step the free queue cannot back is refused without allocating (vLLM preempts there; the scheduler retracts).
The rules and their vLLM functions: docs/vllm-rules.md.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from operator import itemgetter

from sim.cache.blocks import boundary_run, hashed_positions, steps
from sim.cache.blocks.admission import (
    admission_need,
    first_chunk_need,
    hit_tables,
    state_cached_this_step,
)
from sim.cache.blocks.chunks import aligned_end, exports_checkpoint, replay_end
from sim.cache.blocks.hashed_positions import HashedPositions
from sim.cache.blocks.hit import longest_hit
from sim.cache.blocks.keys import BlockKeys, KeyChain
from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.blocks.layout import policy_layout
from sim.cache.blocks.lazy_keys import key_cap, list_late
from sim.cache.blocks.plain import PlainBlockDecodes
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.private import NEVER, private_from
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.startup import check_config, in_flight_tokens, settle_max_model_len
from sim.cache.events import Aborted, Admitted, BlockHit, BlocksSkipped, EventBus, Finished, emit
from sim.cache.policy import Policy, own_knobs
from sim.cache.resolve import resolve
from sim.cache.results import AdmitResult, ChunkPlan, FinishResult, MatchResult, Refusal
from sim.cache.sizing import PoolSizes
from sim.models import FULL, MAMBA, SWA, ModelSpec
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
        # the unit of the pool columns and of a hit: the scheduler block (every group's block size divides it)
        self.page_size, self.window = self.layout.block_size, self.layout.window
        self.has_swa, self.has_mamba = SWA in self.layout.kinds, MAMBA in self.layout.kinds
        self.async_scheduling, self.batches_in_flight = knobs.async_scheduling, knobs.batches_in_flight
        check_config(self.layout, policy, model)
        self.max_model_len = settle_max_model_len(self.layout, sizes.blocks, policy)
        self.num_blocks = sizes.blocks
        self.pool = BlockPool(sizes.blocks, self.layout.group_kinds, self.events)
        self._on_hit, self._on_skip = self.events.channel(BlockHit), self.events.channel(BlocksSkipped)
        self.keys = BlockKeys(self.layout.hash_block)
        self.requests = {}
        self._waiting_chains: dict[str, KeyChain] = {}
        self._preempted: dict[str, MatchResult] = {}  # the hit each preempted request reported
        # a preempted request's prompt as sent (it returns with its outputs)
        self._prompts: dict[str, int] = {}
        self._mamba_keys_this_step = set()  # MambaManager.cached_blocks_this_step
        # told by ``watch_misses``: a private block's eviction is not told
        self.shared_sources = None
        self.one_block_hash = self.steady_steps = True  # fast paths (a test turns them off: the reference)
        self.boundary_runs = boundary_run.BY_RUNS  # a run's boundary steps in one loop (off: step by step)
        # a SWA window's frees split by position (off, None: each block's key read, the reference)
        positions = HashedPositions(self.layout, knobs.retention_interval)
        self.hashed: HashedPositions | None = positions if hashed_positions.BY_POSITION else None

    def admit(
        self, request_id: str, tokens: TokenSeq, prompt_len: int, budget: int | None = None
    ) -> AdmitResult | Refusal:
        """``budget``: the tokens the step can give the request's first chunk; where align-mode Mamba cuts it
        to nothing the request waits, nothing touched (the scheduler's ``num_new_tokens == 0: break``)."""
        if request_id in self.requests:
            raise ValueError(f"request {request_id!r} is already admitted")
        # a request refused admission is asked again every step: its keys are kept until it is admitted; its
        # private blocks' are not computed while they would be kept out unkeyed (``lazy_keys.py``)
        private = NEVER if self.shared_sources is None else private_from(tokens, self.shared_sources)
        hash_block = self.layout.hash_block
        num_keys = min((prompt_len - 1) // hash_block, key_cap(self.pool, private, hash_block))
        chain = self.keys.chain(tokens, num_keys, self._waiting_chains.get(request_id))
        past_state = self.policy.fault == "vllm-hit-past-state"  # a negative control
        hit = longest_hit(self.layout, self.pool, chain.keys, prompt_len, past_state)
        if not self.knobs.junction:  # the scheduler before vLLM #37898
            hit = hit._replace(junction=0)
        tables = hit_tables(self.layout, self.pool, chain.keys, hit.tokens, past_state)
        refusal = self._admission_refusal(hit, tables, prompt_len, budget, request_id)
        if refusal is not None:
            self._waiting_chains[request_id] = chain
            return refusal
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
                num_prompt_tokens=self._prompts.get(request_id, prompt_len),
                private_from=private,
            )
        )

    def _admission_refusal(
        self, hit, tables: list[list[int | None]], prompt_len: int, budget: int | None, request_id: str
    ) -> Refusal | None:
        """The scheduler's and ``allocate_slots``' checks, in their order, none touching a block: the chunk
        align-mode Mamba leaves, a Mamba hit hashed this step, the whole prompt, the first chunk."""
        end = budget and self._chunk_end(hit.tokens, prompt_len, budget, hit.junction, request_id)
        if budget is not None and end <= hit.tokens:
            return Refusal(POOL, 1, 0, "align-mode Mamba cuts the first chunk to nothing this step")
        if state_cached_this_step(self.layout, self.pool, tables, self._mamba_keys_this_step):
            return Refusal(
                POOL, self.num_blocks + 1, self.pool.num_free, "its Mamba hit was hashed this step"
            )
        swa_cap = min(self.window - 1 + in_flight_tokens(self.policy), self.max_model_len)
        needed = admission_need(self.layout, self.pool, tables, prompt_len, swa_cap)
        if needed <= self.pool.num_free and end is not None:
            checkpoint = self._exports_checkpoint(hit.tokens, end, prompt_len)
            needed = first_chunk_need(self.layout, self.pool, tables, end, checkpoint)
        return Refusal(POOL, needed, self.pool.num_free) if needed > self.pool.num_free else None

    def _start(self, req: BlockRequest) -> AdmitResult:
        """Touch the hit's blocks and run the request. vLLM reports the first admission's hit
        (``PrefillStats`` is set once): a preempted request admitted again keeps reporting it."""
        for group, table in enumerate(req.tables):
            self.pool.touch(table, group)
        self.requests[req.request_id] = req
        req.match = self._preempted.pop(req.request_id, req.match)  # kept through any later preemption
        result = AdmitResult(req.match, None)
        self._prompts.pop(req.request_id, None)
        self.events.publish(Admitted(req.request_id, result.match.cached_len))
        return result

    def next_chunk_len(self, request_id: str, budget: int) -> int:
        """``min(remaining, budget)``, cut where align-mode Mamba must stop (``_mamba_block_aligned_split``)."""
        req = self.requests[request_id]
        if budget <= 0:
            return 0
        return max(
            self._chunk_end(req.kv_len, req.prompt_len, budget, req.junction, request_id) - req.kv_len, 0
        )

    def _chunk_end(self, start: int, prompt_len: int, budget: int, junction: int, rid: str = "") -> int:
        end = start + min(prompt_len - start, budget)
        if not self.has_mamba:
            return end
        running = self.requests.get(rid)
        sent = self._prompts.get(rid, running.num_prompt_tokens if running else 0)  # the prompt as sent
        B, internal = self.layout.block_of(MAMBA), bool(self.layout.checkpoint_blocks)
        max_batched, prefill_end = self.policy.chunked_prefill_size, replay_end(sent, prompt_len)
        return aligned_end(B, start, end, prompt_len, junction, max_batched, internal, prefill_end)

    def prepare_prefill(self, request_id: str, chunk_len: int, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        start, end = req.kv_len, req.kv_len + chunk_len
        if chunk_len <= 0 or end > req.prompt_len:
            raise ValueError(f"{request_id}: bad prefill chunk of {chunk_len} at {start}/{req.prompt_len}")
        return self._step(req, end, self._exports_checkpoint(start, end, req.prompt_len), iteration)

    def _exports_checkpoint(self, start: int, end: int, prompt_len: int) -> bool:
        every_chunk = self.knobs.retention_interval != 0
        return bool(self.layout.checkpoint_blocks) and exports_checkpoint(
            self.layout.block_of(MAMBA), start, end, prompt_len, every_chunk
        )

    def complete_prefill(self, request_id: str, chunk_len: int) -> None:
        self.requests[request_id].kv_len += chunk_len

    def prepare_decode(self, request_id: str, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        return self.steady_step(req, iteration) or self._step(req, req.kv_len + 1, False, iteration)

    def complete_decode(self, request_id: str) -> None:
        req = self.requests[request_id]
        req.kv_len += 1
        req.decode_steps += 1

    def _step(self, req: BlockRequest, end: int, checkpoint: bool, iteration: int) -> ChunkPlan | Refusal:
        """``allocate_slots`` for the step ``[kv_len, end)``."""
        early = self.policy.fault == "vllm-early-free"  # a negative control
        processed = req.processed(iteration, self.async_scheduling)
        steps.release_skipped(self.layout, self.pool, req, processed, early, self.hashed)
        plan = steps.blocks_to_allocate(self.layout, req.tables, end, checkpoint)
        needed = sum(map(itemgetter(1), plan))  # a Mamba group's nulls come with a block: none without
        if needed > self.pool.num_free:
            return Refusal(POOL, needed, self.pool.num_free)
        if needed:
            steps.allocate(self.pool, req, plan)
        # only known tokens are hashed: under async scheduling the step in flight is a placeholder token
        known = max(req.prompt_len, processed + 1)
        self._cache(req, min(end, known), checkpoint)
        req.record_step(iteration, end - req.kv_len)
        return ChunkPlan(req.request_id, req.kv_len, end, None)

    def finish(self, request_id: str) -> FinishResult:
        """The last step's output processed: its blocks hashed (``update_from_output``), then freed."""
        self._cache(self.requests[request_id], self.requests[request_id].kv_len, False)
        req = self.requests.pop(request_id)
        steps.free_request(self.pool, req)
        full_block = self.layout.block_of(FULL)
        result = FinishResult(inserted_len=req.kv_len // full_block * full_block)
        self.events.publish(Finished(request_id, result.inserted_len))
        return result

    def begin_pass(self, in_flight: AbstractSet[str] = frozenset()) -> None:
        """``KVCacheManager.new_step_starts``: a step's Mamba hashes are usable from the next step on."""
        self._mamba_keys_this_step.clear()

    def settle(self, request_id: str, in_flight: int) -> None:
        """``update_from_output`` of a step processed after the next was scheduled: its sampled token's blocks
        are hashed now (``cache_blocks(request, num_computed - num_in_flight)``: up to the processed step)."""
        req = self.requests[request_id]
        self._cache(req, req.kv_len, False)

    def abort(self, request_id: str) -> None:
        """A preemption: the request's blocks are freed as at a finish (what was hashed stays cached); if it
        is admitted again, it still reports its first admission's hit."""
        req = self.requests.pop(request_id)
        if self.pool.keeps_private_out:  # the only request that can ask for its private blocks may come back
            list_late(self.pool, [req, *self.requests.values()], self.keys)
        self._preempted.setdefault(request_id, req.match)
        self._prompts.setdefault(request_id, req.num_prompt_tokens or req.prompt_len)
        steps.free_request(self.pool, req)
        self.events.publish(Aborted(request_id))

    def discard(self) -> None:
        """Nothing to unlink: the block pool holds no cycles."""
