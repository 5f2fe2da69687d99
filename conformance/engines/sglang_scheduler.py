"""SGLang's own ``Scheduler`` on CPU, without a model: its real event loop, batch building and result
processing, with only the model forward, the request socket and the metrics/IPC sinks stood in.

The scheduler is built in ``sglang_scheduler_build.py``; here the client that submits the requests and the
teacher-forced forward that answers each batch.
"""

from __future__ import annotations

import time
from array import array

from conformance.engines.sglang_runtime import VOCAB_SIZE
from conformance.scenario import EngineOutcome, ServedRequest

STALL_POLLS = 64  # idle scheduler iterations with the request still waiting: SGLang will never admit it


class Client:
    """ingest_requests stand-in: a client that sends each request once the previous one's final output has
    been streamed (one at a time, think time 0), then lets the loop drain and stop."""

    def __init__(self, scheduler, requests: list[ServedRequest]) -> None:
        self.scheduler, self.pending, self.current = scheduler, list(requests), None
        self.outputs: dict[str, list[int]] = {r.request_id: list(r.output) for r in requests}
        self.reqs: dict[str, object] = {}
        self.num_polls = self.num_stalled_polls = self.last_forward_ct = 0
        self.never_admitted: dict[str, str] = {}  # request id -> "waiting" | "chunked"
        self.max_polls = 20 * sum(len(r.prompt) + len(r.output) for r in requests) + 1000

    def __call__(self, stop_at_pause: bool = False) -> list:
        s = self.scheduler
        self.num_polls += 1
        if self.num_polls > self.max_polls:
            raise RuntimeError(f"SGLang's loop made no end after {self.max_polls} iterations (a livelock)")
        if self.current is not None and self.current.rid not in s.output_streamer.finished:
            self._give_up_if_never_admitted()
            return []
        if not self.pending:
            s.gracefully_exit = not s.result_queue and s.last_batch is None and not s.waiting_queue
            return []
        self.current = self._submit(self.pending.pop(0))
        return []

    def _give_up_if_never_admitted(self) -> None:
        """A request SGLang can never move on (the idle scheduler's PrefillAdder answers NO_TOKEN to it, or
        to its next prefill chunk, every pass) would wait forever in SGLang. After STALL_POLLS passes with
        no forward the client gives up: a waiting request leaves the queue; a stalled chunked request is
        aborted through SGLang's own path (``_pending_chunked_abort_req``, as ``abort_request`` does)."""
        s, req = self.scheduler, self.current
        moved = s.forward_ct != self.last_forward_ct or s.result_queue or s.last_batch is not None
        self.last_forward_ct = s.forward_ct
        self.num_stalled_polls = 0 if moved else self.num_stalled_polls + 1
        if self.num_stalled_polls < STALL_POLLS or req.rid in self.never_admitted:
            return
        if req in s.waiting_queue:
            s.waiting_queue.remove(req)
            s.output_streamer.finished.add(req.rid)
        elif s.chunked_req is req:
            s._pending_chunked_abort_req = req
        else:
            raise RuntimeError(
                f"{req.rid}: SGLang's scheduler stopped with the request neither waiting nor chunked"
            )
        self.never_admitted[req.rid] = "waiting" if req.rid in s.output_streamer.finished else "chunked"

    def _submit(self, request: ServedRequest):
        """The tail of Scheduler._handle_generate_request for a plain text request."""
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.sampling.sampling_params import SamplingParams

        s = self.scheduler
        params = SamplingParams(max_new_tokens=len(request.output), ignore_eos=True)
        params.normalize(None)
        params.verify(VOCAB_SIZE)
        req = Req(request.request_id, "", array("q", request.prompt), params, vocab_size=VOCAB_SIZE)
        req.tokenizer = None
        s.init_req_max_new_tokens(req)
        req.logprob_start_len = -1
        self.reqs[req.rid] = req
        s._add_request_to_queue(req)
        return req


def teacher_forced_forward(scheduler, client: Client):
    """run_batch without a model: the scheduler's counters as run_batch keeps them, and the scenario's next
    output token as every request's "sampled" token."""
    import torch
    from sglang.srt.managers.utils import GenerationBatchResult

    def run_batch(batch, pp_proxy_tensors=None):
        scheduler.forward_ct += 1
        batch.forward_iter = scheduler.forward_ct
        batch.launch_ts = time.monotonic()
        batch.after_idle_gap = scheduler._sched_idled
        scheduler._sched_idled = False
        if batch.extend_num_tokens:
            scheduler.processed_tokens_counter += batch.extend_num_tokens
        # the token this forward samples for a request follows its last computed position; under the overlap
        # loop output_ids still lags by the step whose result is not processed yet, so count positions
        seq_lens = batch.seq_lens_cpu.tolist()
        tokens = [
            _next_token(client.outputs[req.rid], seq_len - len(req.origin_input_ids))
            for req, seq_len in zip(batch.reqs, seq_lens, strict=True)
        ]
        batch.input_ids = None  # the overlap path relays the next input through the future map
        return GenerationBatchResult(next_token_ids=torch.tensor(tokens, dtype=torch.int64))

    return run_batch


def _next_token(output: list[int], index: int) -> int:
    """Output token ``index``; a middle prefill chunk (index < 0) samples a token SGLang discards."""
    return output[min(max(index, 0), len(output) - 1)]


def serve(scheduler, requests: list[ServedRequest]) -> Client:
    """Run Scheduler.event_loop_overlap (SGLang's default loop) until every request has finished."""
    client = Client(scheduler, requests)
    scheduler.ingest_requests = client
    scheduler.run_batch = teacher_forced_forward(scheduler, client)
    scheduler.event_loop_overlap()
    return client


def _abort_reason(req):
    """SGLang's abort of a request: its finish reason, or the one ``retract_decode`` (a lone request that
    cannot be retracted) or ``init_req_max_new_tokens`` left in ``to_finish``."""
    from sglang.srt.managers.schedule_batch import FINISH_ABORT

    for reason in (req.finished_reason, req.to_finish):
        if isinstance(reason, FINISH_ABORT):
            return reason
    return None


STALLED = {
    "waiting": "never admitted: the idle scheduler's PrefillAdder keeps answering NO_TOKEN (SGLang would wait "
    "forever)",
    "chunked": "stalled mid prefill: PrefillAdder never admits the next chunk (SGLang would wait forever)",
}


def outcome(req, stalled: str | None) -> EngineOutcome:
    if stalled is not None:
        return EngineOutcome(0, served=False, note=STALLED[stalled])
    abort = _abort_reason(req)
    if abort is not None:
        return EngineOutcome(0, served=False, note=f"aborted: {abort.message}")
    return EngineOutcome(int(req.cached_tokens))
