"""SGLang's own ``Scheduler`` on CPU, without a model: its real event loop, batch building and result
processing, with only the model forward, the request socket and the metrics/IPC sinks stood in.

``Scheduler.__new__`` skips ``__init__`` (which loads a model, opens sockets and joins process groups);
the attributes it would set are set here to the values that ``__init__`` gives for a single-GPU, non-PD,
non-speculative, text-only server, and the state-only ``init_*`` methods are called for real.
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from types import SimpleNamespace

from conformance.engines.sglang_runtime import CONTEXT_LEN, VOCAB_SIZE, Pools
from conformance.scenario import EngineConfig, ServedRequest

STALL_POLLS = 64  # idle scheduler iterations with the request still waiting: SGLang will never admit it


class NoMetrics:
    """metrics_reporter / metrics_collector / load_publisher: counters and log sinks only."""

    def __init__(self) -> None:
        self.enable_metrics = False
        self.num_generated_tokens = 0
        self.num_retracted_reqs = 0
        self.forward_ct_decode = 0

    def _ignore(self, *args, **kwargs) -> None:
        return None

    log_batch_result_stats = report_prefill_stats = report_decode_stats = update_device_timer = _ignore
    record_scheduler_active = record_scheduler_idle = _maybe_log_idle_metrics = publish_load_stat = _ignore
    increment_retracted_reqs = _ignore


class OutputSink:
    """output_streamer: where finished requests would be sent to the detokenizer; records who finished."""

    def __init__(self) -> None:
        self.finished: set[str] = set()

    def stream_output(self, reqs, return_logprob=False, skip_req=None) -> None:
        self.finished.update(req.rid for req in reqs if req.finished() and req is not skip_req)


class TokenizerSocket:
    """ipc_channels.send_to_tokenizer: where an abort (a request SGLang gives up on) is sent; records it."""

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink

    def send_output(self, output, req=None) -> None:
        if req is not None:
            self.sink.finished.add(req.rid)


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


def make_scheduler(config: EngineConfig, pools: Pools):
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.observability.scheduler_stage_metrics import SchedulerStageMetricsRecorder
    from sglang.srt.runtime_context import get_context, get_schedule
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    s = Scheduler.__new__(Scheduler)
    s.__dict__.update(_flags(), **_sizes(config, pools))
    s.__dict__.update(
        tree_cache=pools.tree_cache,
        token_to_kv_pool_allocator=pools.allocator,
        req_to_token_pool=pools.req_to_token_pool,
        model_config=_model_config(config),
        spec_algorithm=SpeculativeAlgorithm.from_string(None),
        disaggregation_mode=DisaggregationMode.NULL,
        page_size=config.page_size,
        is_hybrid_swa=config.has_swa,
        is_hybrid_ssm=config.has_mamba,
        sliding_window_size=config.window if config.has_swa else None,
        scheduler_stage_metrics=SchedulerStageMetricsRecorder(enabled=False),
    )
    _chunked_prefill(s, get_schedule())
    s.init_running_status()
    s.init_schedule_policy()
    s.init_mamba_truncation_align()
    get_context().override(
        "scheduler.pp_max_micro_batch_size_default",
        pp_max_micro_batch_size=max(pools.max_running_requests, 1),
    )
    _stand_ins(s)
    s.init_batch_result_processor()
    s.init_dp_attn_adapter()
    s.init_pool_stats_observer()
    s.init_invariant_checker()
    return s


def _flags() -> dict:
    """What Scheduler.__init__ reads off the server arguments for this server (all features off)."""
    return dict(
        forward_ct=0,
        processed_tokens_counter=0,
        cur_batch_for_debug=None,
        schedule_policy="fcfs",
        enable_hierarchical_cache=False,
        enable_priority_scheduling=False,
        schedule_low_priority_values_first=False,
        priority_scheduling_preemption_threshold=10,
        enable_lora=False,
        enable_overlap=True,
        enable_overlap_mlx=False,
        enable_pdmux=False,
        enable_lmcache=False,
        enable_session_radix_cache=False,
        enable_hicache_storage=False,
        enable_unified_cache_external_linker=False,
        enable_decode_hicache=False,
        enable_hisparse=False,
        attn_dp_enabled=False,
        enable_unified_memory=False,
        is_generation=True,
        dllm_config=None,
        hisparse_coordinator=None,
        decode_offload_manager=None,
        draft_worker=None,
        require_mlp_sync=False,
        min_free_slots_delayer=None,
        truncation_align_size=None,
        dynamic_chunk_sizer=None,
        max_new_tokens_limit=None,
        max_queued_requests=None,
        kv_shard_widening=1,
        future_map=None,
        load_snapshot_writer=None,
        enable_fpm=False,
        rust_server=None,
        idle_sleeper=None,
        _war_barrier_enabled=False,
        total_prefill_uncached_tokens=0,
        total_prefill_busy_us=0,
        decode_moment_totals=[0.0] * 6,
        _prev_step=None,
        _prev_prefill_end_ts=None,
        _sched_idled=False,
        _pause_intervals=deque(maxlen=1024),
        _pause_started_at=None,
    )


def _sizes(config: EngineConfig, pools: Pools) -> dict:
    """TpModelWorker.get_worker_info for these pools."""
    max_req_len = min(CONTEXT_LEN - 1, config.full_tokens - 1)
    return dict(
        max_total_num_tokens=config.full_tokens,
        max_prefill_tokens=16384,
        max_running_requests=pools.max_running_requests,
        max_req_len=max_req_len,
        max_req_input_len=max_req_len - 5,
        full_tokens_per_layer=config.full_tokens,
        swa_tokens_per_layer=config.swa_tokens if config.has_swa else None,
    )


def _model_config(config: EngineConfig) -> SimpleNamespace:
    """The facts about the model that the batch code reads (no HF config is loaded)."""
    return SimpleNamespace(
        vocab_size=VOCAB_SIZE,
        is_encoder_decoder=False,
        is_multimodal=False,
        context_len=CONTEXT_LEN,
        hf_eos_token_id=None,
        think_end_ids=None,
        self_opened_think_start_ids=None,
        hf_text_config=SimpleNamespace(mamba_chunk_size=config.mamba_chunk),
    )


def _chunked_prefill(s, schedule) -> None:
    """Scheduler.init_chunked_prefill for a text-only model (its model-architecture lookup needs an HF config)."""
    size = schedule.chunked_prefill_size
    s.__dict__.update(
        chunked_prefill_size=size if size and size > 0 else None,
        chunked_req=None,
        prefill_decode_interval=schedule.prefill_decode_interval or 0,
        _prefill_decode_interval_remaining=0,
        prefill_decode_interval_min_bs=schedule.prefill_decode_interval_min_bs,
        _pending_chunked_abort_req=None,
        is_mixed_chunk=False,
    )


def _stand_ins(s) -> None:
    """The non-policy collaborators: model worker, metrics and IPC sinks, grammar, dLLM, n-gram, KV events."""
    metrics, sink = NoMetrics(), OutputSink()
    s.__dict__.update(
        metrics_reporter=metrics,
        metrics_collector=metrics,
        load_publisher=metrics,
        output_streamer=sink,
        ipc_channels=SimpleNamespace(send_to_tokenizer=TokenizerSocket(sink)),
        model_worker=None,
        weight_updater=SimpleNamespace(offload_tags=set()),
        tp_worker=SimpleNamespace(model_runner=SimpleNamespace(attn_backend=None, prefill_aware_swa=False)),
        load_inquirer=SimpleNamespace(
            _get_num_pending_tokens=lambda chunk_deduct=0: 0, get_loads=lambda: None
        ),
        grammar_manager=SimpleNamespace(grammar_queue=[], has_waiting_grammars=lambda: False),
        dllm_manager=SimpleNamespace(any_staging_reqs=lambda: False),
        ngram_embedding_manager=SimpleNamespace(prepare_for_forward=lambda batch, chunked_req=None: batch),
        kv_events_publisher=SimpleNamespace(publish_kv_events=lambda: None),
    )


def serve(scheduler, requests: list[ServedRequest]) -> Client:
    """Run Scheduler.event_loop_overlap (SGLang's default loop) until every request has finished."""
    client = Client(scheduler, requests)
    scheduler.ingest_requests = client
    scheduler.run_batch = teacher_forced_forward(scheduler, client)
    scheduler.event_loop_overlap()
    return client
