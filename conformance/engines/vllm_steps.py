"""vLLM 0.33.0 under concurrent load: its engine-core loop with many requests in flight, on a step clock.

``EngineLoop.step`` / ``step_with_batch_queue`` (``vllm_loop``) around vLLM's own scheduler. Request i is added
(``Scheduler.add_request``) before the call at step ``k_i``; every call that schedules tokens is one step; an
idle engine jumps to the next arrival. After each scheduling call the step is recorded: the batch as
scheduled (``SchedulerOutput.num_scheduled_tokens``, in its order; prefill while the request's computed tokens
were below its prompt), the requests preempted in it or in a call since that scheduled nothing, and the pool
once the call processed its step (async scheduling: the step before): empty free blocks, and per group kind the
hashed blocks in the free queue.
"""

from __future__ import annotations

from conformance.engines.vllm_loop import EngineLoop
from conformance.scenario import ServedRequest
from conformance.trajectory import Served, Step, Trajectory, pools_of

_KINDS = {"FullAttentionSpec": "FULL", "SlidingWindowSpec": "SWA", "MambaSpec": "MAMBA"}


class StepLoop(EngineLoop):
    def __init__(self, scheduler, batch_queue_size: int, components: tuple[str, ...]) -> None:
        super().__init__(scheduler, batch_queue_size)
        self.components = components
        groups = scheduler.kv_cache_config.kv_cache_groups
        self.group_kind = [_KINDS[type(group.kv_cache_spec).__name__] for group in groups]
        self.steps: list[Step] = []
        self.launched_at: dict[int, int] = {}  # id(scheduler output) -> its step clock
        self.finished_at: dict[str, int] = {}
        self.clock = 0
        self.preempted: set[str] = set()  # since the last step (a call that schedules nothing may preempt)

    def call(self) -> bool:
        """One engine-core call; True if it scheduled tokens (a step)."""
        before = len(self.steps)
        if self.batch_queue is None:
            self.step()
        else:
            self.step_with_batch_queue()
        return len(self.steps) > before

    def schedule(self):
        """``Scheduler.schedule`` and what the step clock records of it."""
        requests = self.scheduler.requests
        output = self.scheduler.schedule()
        self.preempted.update(output.preempted_req_ids or ())
        if output.total_num_scheduled_tokens > 0:
            batch = tuple(
                (rid, n, n > 1 or requests[rid].num_computed_tokens - n < requests[rid].num_prompt_tokens)
                for rid, n in output.num_scheduled_tokens.items()
            )
            preempted = tuple(sorted(self.preempted))
            self.preempted = set()
            self.launched_at[id(output)] = self.clock
            self.steps.append(Step(self.clock, batch, (), preempted))
        return output

    def _record(self, engine_core_outputs: dict, scheduler_output=None) -> None:
        super()._record(engine_core_outputs, scheduler_output)
        at = self.launched_at.get(id(scheduler_output)) if scheduler_output is not None else None
        for outputs in engine_core_outputs.values():
            for output in outputs.outputs:
                if output.finish_reason is not None and at is not None:
                    self.finished_at[output.request_id] = at + 1

    def pools(self) -> tuple[tuple[int, int], ...]:
        pool = self.scheduler.kv_cache_manager.block_pool
        cached = dict.fromkeys(("FULL", "SWA", "MAMBA"), 0)
        for key, blocks in pool.cached_block_hash_to_block._cache.items():
            for block in blocks.values() if isinstance(blocks, dict) else (blocks,):
                if block.ref_cnt == 0:
                    cached[self.group_kind[key_group(key)]] += 1
        empty = pool.get_num_free_blocks() - sum(cached.values())
        return pools_of({kind: (empty, cached[kind]) for kind in cached}, self.components)


def key_group(key) -> int:
    """The group id of a ``BlockHashWithGroupId`` (the hash bytes, then the group id in 4 bytes)."""
    from vllm.v1.core.kv_cache_utils import get_group_id

    return get_group_id(key)


def serve_steps(
    scheduler,
    batch_queue_size: int,
    requests: list[ServedRequest],
    arrivals: list[int],
    make_request,
    components,
) -> Trajectory:
    loop = StepLoop(scheduler, batch_queue_size, components)
    order = sorted(range(len(requests)), key=lambda index: (arrivals[index], index))
    submitted, limit = 0, 4 * sum(len(r.prompt) + len(r.output) for r in requests) + 64
    for _ in range(limit):
        while submitted < len(order) and arrivals[order[submitted]] <= loop.clock:
            served = requests[order[submitted]]
            loop.runner.expect(served)
            scheduler.add_request(make_request(served))
            submitted += 1
        if not (scheduler.has_requests() or loop.batch_queue):
            if submitted == len(order):
                return _trajectory(loop, requests)
            loop.clock = arrivals[order[submitted]]
            continue
        stepped = loop.call()
        if stepped:
            loop.steps[-1] = loop.steps[-1]._replace(pools=loop.pools())
            loop.clock += 1
    raise RuntimeError(f"vLLM's loop made no end after {limit} calls")


def _trajectory(loop: StepLoop, requests: list[ServedRequest]) -> Trajectory:
    outcomes = {}
    for request in requests:
        rid = request.request_id
        served = rid in loop.finished_at
        cached = loop.cached_tokens.get(rid, 0) if served else 0
        outcomes[rid] = Served(cached, served, loop.finished_at.get(rid), "" if served else "never finished")
    return Trajectory(tuple(loop.steps), outcomes)
