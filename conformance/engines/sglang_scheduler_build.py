"""SGLang's own ``Scheduler`` built without its ``__init__`` (which loads a model, opens sockets and joins
process groups): the attributes ``__init__`` gives a single-GPU, non-PD, non-speculative, text-only server,
and the state-only ``init_*`` methods called for real."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

from conformance.engines.sglang_runtime import CONTEXT_LEN, VOCAB_SIZE, Pools
from conformance.engines.sglang_stubs import NoMetrics, OutputSink, TokenizerSocket
from conformance.scenario import EngineConfig


def make_scheduler(config: EngineConfig, pools: Pools):
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.observability.scheduler_stage_metrics import SchedulerStageMetricsRecorder
    from sglang.srt.runtime_context import get_context, get_schedule
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    s = Scheduler.__new__(Scheduler)
    s.__dict__.update(_flags(config.overlap, config.schedule_policy), **_sizes(config, pools))
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
    _chunked_prefill(s, get_schedule(), config.mixed_chunk)
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


def _flags(overlap: bool = True, schedule_policy: str = "fcfs") -> dict:
    """What Scheduler.__init__ reads off the server arguments for this server (all features off)."""
    return dict(
        forward_ct=0,
        processed_tokens_counter=0,
        cur_batch_for_debug=None,
        schedule_policy=schedule_policy,  # --schedule-policy
        enable_hierarchical_cache=False,
        enable_priority_scheduling=False,
        schedule_low_priority_values_first=False,
        priority_scheduling_preemption_threshold=10,
        enable_lora=False,
        enable_overlap=overlap,  # --disable-overlap-schedule: event_loop_normal
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


def _chunked_prefill(s, schedule, mixed_chunk: bool) -> None:
    """Scheduler.init_chunked_prefill for a text-only model (its model-architecture lookup needs an HF config);
    ``mixed_chunk``: --enable-mixed-chunk."""
    size = schedule.chunked_prefill_size
    s.__dict__.update(
        chunked_prefill_size=size if size and size > 0 else None,
        chunked_req=None,
        prefill_decode_interval=schedule.prefill_decode_interval or 0,
        _prefill_decode_interval_remaining=0,
        prefill_decode_interval_min_bs=schedule.prefill_decode_interval_min_bs,
        _pending_chunked_abort_req=None,
        is_mixed_chunk=bool(size and size > 0) and mixed_chunk,
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
