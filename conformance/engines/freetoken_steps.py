"""FreeToken 0.2.1 under concurrent load: its scheduler loop with many requests in flight, on a step clock.

The loop is the driver's copy of ``Scheduler.overlap_loop`` / ``normal_loop`` (``freetoken_loop``) around
FreeToken's own scheduling, cache and result processing. Request i is submitted (``_process_one_msg``) before
the iteration at step ``k_i``; every iteration that launches a batch is one step; an idle engine jumps to the
next arrival. After each launching iteration the step is recorded: the batch as launched and FreeToken's
pools once the iteration processed the step before (overlap) or this one. A pending request that no
iteration can move on (nothing running, nothing in flight) is aborted, as a client gives up.
"""

from __future__ import annotations

import functools

from conformance.engines.freetoken_audit import PageAudit
from conformance.engines.freetoken_loop import _fake_forward, _prepare_batch
from conformance.scenario import ServedRequest
from conformance.trajectory import EngineCorrupt, Served, Step, Trajectory, pools_of


def serve_steps(
    engine, requests: list[ServedRequest], arrivals: list[int], overlap: bool, components: tuple[str, ...]
) -> Trajectory:
    loop = _StepLoop(engine, requests, overlap, components)
    order = sorted(range(len(requests)), key=lambda index: (arrivals[index], index))
    clock, submitted = 0, 0
    for _ in range(_limit(requests)):
        while submitted < len(order) and arrivals[order[submitted]] <= clock:
            loop.submit(order[submitted])
            submitted += 1
        if not loop.busy():
            if submitted == len(order):
                return loop.trajectory()
            clock = arrivals[order[submitted]]
            continue
        if loop.iterate(clock):
            clock += 1
    raise RuntimeError(f"FreeToken's loop made no end after {_limit(requests)} iterations")


def _limit(requests: list[ServedRequest]) -> int:
    return 4 * sum(len(r.prompt) + len(r.output) for r in requests) + 64


class _StepLoop:
    def __init__(self, engine, requests: list[ServedRequest], overlap: bool, components: tuple[str, ...]):
        self.engine, self.scheduler, self.overlap = engine, engine.scheduler, overlap
        self.requests, self.components = requests, components
        self.outputs: dict[int, list[int]] = {}
        self.forward = functools.partial(_fake_forward, self.scheduler, self.outputs)
        self.scheduler._prepare_batch = functools.partial(_prepare_batch, self.scheduler)
        self.in_flight: tuple | None = (
            None  # overlap: (forward input, output, step clock) launched, not processed
        )
        self.steps: list[Step] = []
        self.cached: dict[int, int] = {}
        self.finished_at: dict[int, int] = {}
        self.refused: dict[int, str] = {}
        self.num_free = 0  # the free list's length when last checked
        self.audit = PageAudit(engine.cache_manager, {i + 1: r.request_id for i, r in enumerate(requests)})

    def submit(self, index: int) -> None:
        import torch
        from freetoken.core import SamplingParams
        from freetoken.message import UserMsg

        request, uid = self.requests[index], index + 1
        self.outputs[uid] = request.output
        params = SamplingParams(max_tokens=len(request.output), ignore_eos=True)
        self.scheduler._process_one_msg(UserMsg(uid, torch.tensor(request.prompt, dtype=torch.int32), params))

    def busy(self) -> bool:
        s = self.scheduler
        return self.in_flight is not None or s.prefill_manager.runnable or s.decode_manager.runnable

    def iterate(self, clock: int) -> bool:
        """One loop iteration at ``clock``; True if it launched a batch."""
        s = self.scheduler
        processing = self.in_flight is not None  # overlap: this iteration processes the step before
        forward_input = s._schedule_next_batch()
        launched = None
        if forward_input is not None:
            batch = self._batch(forward_input.batch)  # before the forward advances every request
            self.audit.launched(forward_input.batch.reqs)
            s._restore_linear_states(forward_input.batch)
            launched = (forward_input, self.forward(forward_input), clock)
        if self.overlap:
            self._process(self.in_flight)
            self.in_flight = launched
        else:
            self._process(launched)
        self._check_pages(clock)
        if launched is not None:
            self.steps.append(Step(clock, batch, self._pools()))
        elif not processing and s.prefill_manager.runnable and not s.decode_manager.runnable:
            self._give_up_on_head()  # nothing ran, nothing was processed: no pass will ever admit it
        return launched is not None

    def _check_pages(self, clock: int) -> None:
        """No page in use may be free (``PageAudit``: the first, wrong free of FreeToken's double free), and
        the free list must hold each page once (the second free): from a break on the engine's own state is
        corrupt and nothing it does can be compared."""
        why = self.audit.check()
        if why is not None:
            raise EngineCorrupt(f"{why}, by step {clock}", tuple(self.steps), clock)
        free = self.engine.cache_manager.free_slots
        if len(free) <= self.num_free:  # nothing freed since the last look: the cheap usual case
            self.num_free = len(free)
            return
        self.num_free = len(free)
        twice = len(free) - free.unique().numel()
        if twice:
            raise EngineCorrupt(
                f"FreeToken freed {twice} KV page(s) twice by step {clock}: its free list would hand "
                "them out twice (docs/notes/conformance-concurrent-findings.md)",
                tuple(self.steps),
                clock,
            )

    def _process(self, data) -> None:
        from freetoken.message import DetokenizeMsg, PromptAdmittedMsg

        start = len(self.engine.replies)
        if data is not None:
            self.scheduler._process_last_data(data[:2])
        self.scheduler._flush_abort_acks()
        for reply in self.engine.replies[start:]:
            if isinstance(reply, DetokenizeMsg) and reply.finished:
                assert data is not None
                self.finished_at[reply.uid] = data[2] + 1
        # PromptAdmittedMsg is sent when a batch is scheduled: the replies before this processing hold them
        for reply in self.engine.replies:
            if isinstance(reply, PromptAdmittedMsg):
                self.cached.setdefault(reply.uid, reply.cached_tokens)

    def _give_up_on_head(self) -> None:
        from freetoken.message import AbortBackendMsg

        head = self.scheduler.prefill_manager.pending_list[0]
        where = "admitted, then no pass backs its next chunk" if head.chunked_req else "no pass admits it"
        self.refused[head.uid] = f"never finished: {where}"
        self.scheduler._process_one_msg(AbortBackendMsg(head.uid))
        self.scheduler._flush_abort_acks()

    def _pools(self) -> tuple[tuple[int, int], ...]:
        cm = self.engine.cache_manager
        tree, page = cm.prefix_cache, cm.page_size
        usage = {"FULL": (len(cm.free_slots), (tree.full_evictable + tree.full_protected) // page)}
        if cm.is_swa:
            usage["SWA"] = (cm.swa_pool.swa_available_size(), tree.swa_evictable + tree.swa_protected)
        if cm.is_hybrid:
            usage["MAMBA"] = (
                cm.linear_state_pool.num_free_slots,
                tree.mamba_evictable + tree.mamba_protected,
            )
        return pools_of(usage, self.components)

    def trajectory(self) -> Trajectory:
        requests = {}
        for index, request in enumerate(self.requests):
            uid = index + 1
            if uid in self.refused or uid not in self.finished_at:
                note = self.refused.get(uid, "never finished")
                requests[request.request_id] = Served(0, False, None, note)
            else:
                requests[request.request_id] = Served(self.cached[uid], True, self.finished_at[uid])
        return Trajectory(tuple(self.steps), requests)

    def _batch(self, batch) -> tuple[tuple[str, int, bool], ...]:
        """The launched batch: each request's tokens this step (a decode step computes one)."""
        return tuple(
            (self.requests[req.uid - 1].request_id, req.extend_len, batch.is_prefill) for req in batch.reqs
        )
