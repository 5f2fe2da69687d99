"""vLLM 0.33.0's engine-core loop around the real scheduler, with a teacher-forced stand-in for the model.

`EngineLoop.step` follows EngineCore.step (schedule, execute, update_from_output) and
`EngineLoop.step_with_batch_queue` follows EngineCore.step_with_batch_queue, which vLLM runs when async
scheduling overlaps two batches: a step is scheduled before the previous one's output is processed. Every
cache call (get_computed_blocks at admission, allocate_slots per chunk and per decode token with the
align-mode split, cache_blocks, free at finish) is the scheduler's own.
"""

from __future__ import annotations

from collections import deque

from conformance.scenario import ServedRequest


class TeacherForcedRunner:
    """Stands in for the model executor: a step that completes a request's known tokens samples the
    request's next scenario output token; a partial prefill chunk samples nothing (the GPU runner discards
    that token). No forward pass runs. A preempted request's in-flight token is still delivered (async
    scheduling marks it stale, not dropped), so counting sampled tokens stays in step with vLLM."""

    def __init__(self, scheduler) -> None:
        self.scheduler = scheduler
        self.outputs: dict[str, list[int]] = {}
        self.num_sampled: dict[str, int] = {}

    def expect(self, served: ServedRequest) -> None:
        self.outputs[served.request_id] = list(served.output)
        self.num_sampled[served.request_id] = 0

    def execute(self, scheduler_output):
        from vllm.v1.outputs import ModelRunnerOutput

        request_ids = list(scheduler_output.num_scheduled_tokens)
        sampled = [self._sample(request_id) for request_id in request_ids]
        return ModelRunnerOutput(
            req_ids=request_ids,
            req_id_to_index={rid: index for index, rid in enumerate(request_ids)},
            sampled_token_ids=sampled,
        )

    def _sample(self, request_id: str) -> list[int]:
        if self.scheduler.requests[request_id].is_prefill_chunk:
            return []
        index = self.num_sampled[request_id]
        outputs = self.outputs[request_id]
        if index >= len(outputs):
            raise RuntimeError(f"{request_id}: scheduled past its {len(outputs)} output tokens")
        self.num_sampled[request_id] = index + 1
        return [outputs[index]]


class EngineLoop:
    def __init__(self, scheduler, batch_queue_size: int) -> None:
        self.scheduler = scheduler
        self.runner = TeacherForcedRunner(scheduler)
        self.batch_queue: deque | None = deque() if batch_queue_size > 1 else None
        self.batch_queue_size = batch_queue_size
        self.cached_tokens: dict[str, int] = {}

    def serve(self, served: ServedRequest, make_request) -> int:
        """Submit one request and run the engine until it finishes; its prefix-cache hit as vLLM reports it
        (PrefillStats.num_cached_tokens, set at its first admission)."""
        self.runner.expect(served)
        request = make_request(served)
        self.scheduler.add_request(request)
        step = self.step if self.batch_queue is None else self.step_with_batch_queue
        budget = 4 * (len(served.prompt) + len(served.output)) + 16  # a step computes at least one token
        while self.scheduler.has_requests() or self.batch_queue:
            budget -= 1
            if budget < 0:
                raise RuntimeError(f"{served.request_id} made no progress (the pool may be too small)")
            step()
        if list(request.output_token_ids) != list(
            served.output
        ):  # teacher forcing held, preemptions included
            raise RuntimeError(f"{served.request_id}: vLLM kept other output tokens than the scenario's")
        return self.cached_tokens[served.request_id]

    def schedule(self):
        """Scheduler.schedule (a subclass records what it scheduled)."""
        return self.scheduler.schedule()

    def step(self) -> None:
        """EngineCore.step."""
        scheduler_output = self.schedule()
        model_output = self.runner.execute(scheduler_output)
        self._record(self.scheduler.update_from_output(scheduler_output, model_output), scheduler_output)

    def step_with_batch_queue(self) -> None:
        """EngineCore.step_with_batch_queue (no structured output, so sampling is never deferred)."""
        queue = self.batch_queue
        if self.scheduler.has_requests():
            scheduler_output = self.schedule()
            executed = scheduler_output.total_num_scheduled_tokens > 0
            queue.appendleft((self.runner.execute(scheduler_output), scheduler_output))
            if len(queue) < self.batch_queue_size and (executed or self.scheduler.has_requests()):
                return
        elif not queue:
            return
        model_output, scheduler_output = queue.pop()
        self._record(self.scheduler.update_from_output(scheduler_output, model_output), scheduler_output)

    def _record(self, engine_core_outputs: dict, scheduler_output=None) -> None:
        for outputs in engine_core_outputs.values():
            for output in outputs.outputs:
                if output.prefill_stats is not None:
                    self.cached_tokens[output.request_id] = output.prefill_stats.num_cached_tokens
