"""SGLang 0.5.23 under concurrent load: its own ``Scheduler.event_loop_overlap`` with many requests in flight, on a
step clock.

The client (``ingest_requests``) submits request i at the start of the first loop iteration at or after its step
``k_i``; every ``run_batch`` is one step (recorded as launched: each request's extend tokens, or one decode
token, and whether the batch extends), and the step's pools are read when the next iteration starts, once the
loop processed the step before (free and tree-held FULL and SWA pages, MAMBA states). A request finishes at the
step after the one whose result finished it; a request retracted to the waiting queue is listed in the step being
scheduled. A chunked request whose next chunk an idle loop never admits, or a waiting head it never admits, is
given up on after the one pass that admitted nothing, as ``simulate`` gives up on it.
"""

from __future__ import annotations

from conformance.engines.sglang_scheduler import Client, teacher_forced_forward
from conformance.engines.sglang_scheduler import outcome as served_outcome
from conformance.scenario import ServedRequest
from conformance.trajectory import Served, Step, Trajectory, pools_of


class StepClient(Client):
    def __init__(self, scheduler, requests: list[ServedRequest], arrivals: list[int], components, page: int):
        super().__init__(scheduler, [])
        self.requests, self.components, self.page = requests, components, page
        self.outputs.update({r.request_id: list(r.output) for r in requests})
        self.order = sorted(range(len(requests)), key=lambda index: (arrivals[index], index))
        self.arrivals, self.submitted, self.clock = arrivals, 0, 0
        self.steps: list[Step] = []
        self.launched: tuple | None = None  # the batch this iteration launched, recorded at the next one
        self.retracted: list[str] = []
        self.finished_at: dict[str, int] = {}
        self.idle_pass: tuple | None = None  # what the last pass saw, where it admitted nothing
        self.max_polls = 40 * sum(len(r.prompt) + len(r.output) for r in requests) + 1000

    def __call__(self, stop_at_pause: bool = False) -> list:
        s = self.scheduler
        self.num_polls += 1
        if self.num_polls > self.max_polls:
            raise RuntimeError(f"SGLang's loop made no end after {self.max_polls} iterations (a livelock)")
        if self.launched is not None:
            self.steps.append(Step(self.clock, self.launched, self._pools(), tuple(sorted(self.retracted))))
            self.launched, self.retracted = None, []
            self.clock += 1
        self._submit_arrived()
        if self._idle():
            if self.submitted == len(self.order):
                s.gracefully_exit = True
                return []
            self.clock = max(self.clock, self.arrivals[self.order[self.submitted]])
            self._submit_arrived()
        self._give_up_if_stalled()
        return []

    def _submit_arrived(self) -> None:
        while self.submitted < len(self.order) and self.arrivals[self.order[self.submitted]] <= self.clock:
            self._submit(self.requests[self.order[self.submitted]])
            self.submitted += 1

    def _idle(self) -> bool:
        s = self.scheduler
        return (
            not s.waiting_queue
            and s.running_batch.is_empty()
            and s.chunked_req is None
            and not s.result_queue
            and s.last_batch is None
        )

    def after_prefill(self, batch) -> None:
        """``get_new_batch_prefill`` returned ``batch``: where it is None, what that prefill pass saw (the
        decode half of the step may free memory after it: a lone request that cannot decode is aborted)."""
        self.idle_pass = None if batch is not None else (self._pools(), len(self.finished_at), self._queue())

    def _give_up_if_stalled(self) -> None:
        """The last pass admitted nothing, and since it nothing finished, freed or took memory, nothing runs
        and nothing is in flight: the pass about to run would see what it saw and admit nothing either, so
        SGLang would wait forever. The client gives up at once, before that pass: a stalled chunked request
        is aborted through SGLang's own path (``_pending_chunked_abort_req``, as ``abort_request`` does), else
        the waiting head leaves the queue. Waiting longer would let the idle loop run passes whose number only
        a real client's timeout decides, and each counts towards the waiting-prefix refresh
        (``SchedulePolicy._touch_waiting_prefixes``, every 32nd pass), which splits and re-stamps the tree;
        ``simulate`` gives up after the one idle pass, as here."""
        s = self.scheduler
        running = s.result_queue or s.last_batch is not None or not s.running_batch.is_empty()
        if self.idle_pass is None or running:
            return
        queue = self._queue()
        if queue[1:] != (None, None) and (self._pools(), len(self.finished_at), queue) == self.idle_pass:
            self._give_up(s.chunked_req)

    def _queue(self) -> tuple[int, str | None, str | None]:
        """What a pass would try to admit: the requests submitted so far (one submitted since the last pass
        has not been tried), the waiting head and the chunked request."""
        s = self.scheduler
        head = s.waiting_queue[0].rid if s.waiting_queue else None
        chunked = s.chunked_req.rid if s.chunked_req is not None else None
        return self.submitted, head, chunked

    def _give_up(self, chunked) -> None:
        s = self.scheduler
        if chunked is not None:
            s._pending_chunked_abort_req = chunked
            self.never_admitted[chunked.rid] = "chunked"
            return
        head = s.waiting_queue.pop(0)
        s.output_streamer.finished.add(head.rid)
        self.never_admitted[head.rid] = "waiting"

    def _pools(self) -> tuple[tuple[int, int], ...]:
        s, page = self.scheduler, self.page
        tree, allocator = s.tree_cache, s.token_to_kv_pool_allocator
        usage = {
            "FULL": (
                _full_free(allocator) // page,
                (tree.full_evictable_size() + tree.full_protected_size()) // page,
            )
        }
        if "SWA" in self.components:
            usage["SWA"] = (
                allocator.swa_available_size() // page,
                (tree.swa_evictable_size() + tree.swa_protected_size()) // page,
            )
        if "MAMBA" in self.components:
            mamba = s.req_to_token_pool.mamba_allocator
            usage["MAMBA"] = (
                mamba.available_size(),
                tree.mamba_evictable_size() + tree.mamba_protected_size(),
            )
        return pools_of(usage, self.components)

    def trajectory(self) -> Trajectory:
        outcomes = {}
        for request in self.requests:
            rid = request.request_id
            outcome = (
                served_outcome(self.reqs[rid], self.never_admitted.get(rid)) if rid in self.reqs else None
            )
            if outcome is None or not outcome.served or rid not in self.finished_at:
                note = outcome.note if outcome is not None else "never submitted"
                outcomes[rid] = Served(0, False, None, note or "never finished")
            else:
                outcomes[rid] = Served(outcome.cached_tokens, True, self.finished_at[rid])
        return Trajectory(tuple(self.steps), outcomes)


def _full_free(allocator) -> int:
    full = getattr(allocator, "full_available_size", None)
    return full() if full is not None else allocator.available_size()


def serve_steps(
    scheduler, requests: list[ServedRequest], arrivals: list[int], components, page: int
) -> StepClient:
    """Run Scheduler.event_loop_overlap (``event_loop_normal`` where the scheduler's overlap is off) until every
    request has finished or been given up on."""
    client = StepClient(scheduler, requests, arrivals, components, page)
    scheduler.ingest_requests = client
    forward = teacher_forced_forward(scheduler, client)

    def run_batch(batch, pp_proxy_tensors=None):
        extend = batch.forward_mode.is_extend()
        decoding = set(batch.decoding_reqs or ()) if extend else set()  # a mixed batch's decode rows
        client.launched = tuple(
            (req.rid, 1, False) if req in decoding else (req.rid, req.extend_len if extend else 1, extend)
            for req in batch.reqs
        )
        result = forward(batch, pp_proxy_tensors)
        result.launched_at = client.clock
        return result

    process = scheduler.process_batch_result

    def process_batch_result(batch, result):
        process(batch, result)
        for req in batch.reqs:
            if req.finished() and req.rid not in client.finished_at:
                client.finished_at[req.rid] = result.launched_at + 1

    add = scheduler._add_request_to_queue

    def add_request_to_queue(req, is_retracted: bool = False):
        if is_retracted:
            client.retracted.append(req.rid)
        return add(req, is_retracted=is_retracted)

    next_batch, prefill = scheduler.get_next_batch_to_run, scheduler.get_new_batch_prefill

    def get_next_batch_to_run(running_batch, last_batch):
        client.idle_pass = None  # set by a prefill pass that admits nothing
        plan = next_batch(running_batch=running_batch, last_batch=last_batch)
        if plan.batch_to_run is not None:
            client.idle_pass = None
        return plan

    def get_new_batch_prefill(running_batch):
        plan = prefill(running_batch)
        client.after_prefill(plan.batch_to_run)
        return plan

    scheduler.get_next_batch_to_run = get_next_batch_to_run
    scheduler.get_new_batch_prefill = get_new_batch_prefill
    scheduler.run_batch = run_batch
    scheduler.process_batch_result = process_batch_result
    scheduler._add_request_to_queue = add_request_to_queue
    if scheduler.enable_overlap:
        scheduler.event_loop_overlap()
    else:
        scheduler.event_loop_normal()
    return client
