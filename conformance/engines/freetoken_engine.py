"""FreeToken 0.2.1's own cache objects, built on CPU from an ``EngineConfig`` with the pools sized exactly.

What is FreeToken's: ``CacheManager`` (with its ``SWARadixCache`` or GDN ``HybridRadixCache``), the SWA pool
``HybridSWAKVCache``, the GDN ``LinearStatePool``, ``TableManager``, ``PrefillManager``, ``DecodeManager``
and the ``Scheduler`` methods that admit, commit, finish and report (called on a ``Scheduler`` built without
its ``__init__``, which would load a model onto a GPU). What is not: the stubs listed in ``STUBS``.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from conformance.scenario import EngineConfig

MAX_RUNNING_REQ = 4  # FreeToken's default (EngineConfig.max_running_req); requests here run one at a time
CONV_KERNEL = 4  # GDN conv width of the tiny linear layer (its state shape only; no kernel runs)

STUBS = {
    "Engine (model, weights, CUDA graphs, attention backend, sampler)": "no forward runs: the driver's "
    "fake forward advances each request (Req.complete_one, as Engine.forward_batch does) and returns the "
    "scenario's next output token as the sampled token",
    "Scheduler.__init__": "builds the Engine and CUDA streams; the driver sets the attributes the real "
    "methods read (managers, counters, eos ids = none, no tool-call anchor) instead",
    "Scheduler.send_result": "ZMQ to the tokenizer; the driver keeps the messages (PromptAdmittedMsg's "
    "cached_tokens is the usage report's cached count)",
    "tensor shapes": "one FULL and one SWA layer with 1 head of dim 1, one GDN layer with 1x1 heads: "
    "pool sizes are what the config says, per-slot payloads are tiny",
    "clock of HybridRadixCache / RadixTreeNode": "time.monotonic_ns gives LRU stamps; a counter that "
    "increases on every call keeps the same order and makes runs repeatable",
    "TP info": "set to rank 0 of 1 when unset (a single-process engine)",
}


@dataclass
class FreeTokenEngine:
    """FreeToken's managers for one scenario, and the ``Scheduler`` whose real methods drive them."""

    # FreeToken's own objects, imported lazily (the engine is optional): typed as FreeToken leaves them
    scheduler: Any
    cache_manager: Any
    replies: list  # every message the scheduler sent (its ``send_result``)
    max_seq_len: int


def build(config: EngineConfig, device=None) -> FreeTokenEngine:
    import torch

    device = device or torch.device("cpu")
    _ensure_tp_info()
    page = config.page_size
    num_pages = config.full_tokens // page
    max_seq_len = num_pages * page  # Engine: min(config.max_seq_len, num_tokens); the model's limit is larger
    page_table = _page_table(max_seq_len, page, device)
    kv_cache = _swa_pool(config, num_pages, device) if config.has_swa else None
    state_pool = _state_pool(config, device) if config.has_mamba else None
    cache_manager = _cache_manager(config, num_pages, page_table, kv_cache, state_pool)
    _set_global_context(page, page_table, state_pool)
    replies: list = []
    scheduler = _scheduler(config, cache_manager, page_table, state_pool, replies, max_seq_len, device)
    return FreeTokenEngine(scheduler, cache_manager, replies, max_seq_len)


def _ensure_tp_info() -> None:
    from freetoken.distributed import set_tp_info, try_get_tp_info

    if try_get_tp_info() is None:
        set_tp_info(0, 1)


def _page_table(max_seq_len: int, page: int, device):
    import torch
    from freetoken.engine.engine import _page_table_width

    table = torch.zeros(
        (MAX_RUNNING_REQ + 1, _page_table_width(max_seq_len, page)), dtype=torch.int32, device=device
    )
    table[MAX_RUNNING_REQ].fill_(max_seq_len)  # the dummy request's row points at the dummy page
    return table


def _swa_pool(config: EngineConfig, num_pages: int, device):
    import torch
    from freetoken.attention.base import AttnType
    from freetoken.kvcache.hybrid_swa_pool import HybridSWAKVCache
    from freetoken.models.config import KVCacheGroupSpec

    groups = [
        KVCacheGroupSpec("full", (0,), 1, 1, None),
        KVCacheGroupSpec("swa", (1,), 1, 1, config.window, attn_type=AttnType.SWA),
    ]
    # +1 page: create_kv_pool's dummy page; +1 SWA slot: slot 0 is the "no live SWA" sentinel
    return HybridSWAKVCache(
        groups,
        num_layers=2,
        num_full_pages=num_pages + 1,
        page_size=config.page_size,
        dtype=torch.float16,
        device=device,
        num_swa_tokens=config.swa_tokens + 1,
    )


def _state_pool(config: EngineConfig, device):
    import torch
    from freetoken.kvcache.linear_state_pool import LinearStatePool
    from freetoken.models.config import LinearGatedDeltaGroupConfig

    group = LinearGatedDeltaGroupConfig(
        name="linear",
        layer_ids=(1,),
        num_key_heads=1,
        num_value_heads=1,
        key_head_dim=1,
        value_head_dim=1,
        conv_kernel_dim=CONV_KERNEL,
        output_gate="silu",
    )
    # +1 slot: slot 0 is the padding sink, never handed out
    return LinearStatePool(
        group, num_slots=config.mamba_states + 1, dtype=torch.float32, device=device, tp_size=1
    )


def _cache_manager(config: EngineConfig, num_pages: int, page_table, kv_cache, state_pool):
    from freetoken.scheduler.cache import CacheManager

    cache_type = "swa_radix" if config.has_swa else "hybrid_radix"
    # A GDN model's pool is a plain MHA pool: no swa_paged, no chunk budget, no replay tokens, which is
    # what CacheManager reads from swa_pool=None too.
    return CacheManager(
        num_pages,
        config.page_size,
        page_table,
        cache_type,
        linear_state_pool=state_pool,
        swa_pool=kv_cache,
        sliding_window_size=config.window if config.has_swa else None,
    )


def _set_global_context(page: int, page_table, state_pool) -> None:
    """``build_fla_metadata`` reads the GDN conv width through the engine's global context."""
    import freetoken.core as core

    context = core.Context(page)
    context.page_table = page_table
    context.linear_state_pool = state_pool
    core._GLOBAL_CTX = context


def _scheduler(
    config: EngineConfig, cache_manager, page_table, state_pool, replies: list, max_seq_len: int, device
):
    from freetoken.scheduler.decode import DecodeManager
    from freetoken.scheduler.prefill import PrefillManager
    from freetoken.scheduler.scheduler import Scheduler
    from freetoken.scheduler.status import SchedulerStatusReporter
    from freetoken.scheduler.table import TableManager

    scheduler = Scheduler.__new__(Scheduler)
    scheduler.engine = SimpleNamespace(
        linear_state_pool=state_pool, encoder_cache=None, max_seq_len=max_seq_len
    )
    scheduler.device = device
    scheduler.table_manager = TableManager(MAX_RUNNING_REQ, page_table)
    scheduler.cache_manager = cache_manager
    scheduler.decode_manager = DecodeManager(config.page_size)
    scheduler.prefill_manager = PrefillManager(
        cache_manager, scheduler.table_manager, scheduler.decode_manager
    )
    scheduler.finished_reqs = set()
    scheduler._pending_abort_acks = set()
    scheduler._abort_tombstones = {}
    scheduler._forward_iter = 0
    scheduler._last_data = None
    scheduler.eos_token_ids = set()  # generation stops at max_tokens ("length"), never at an EOS
    scheduler.toolcall_anchor_id = None
    scheduler.token_pool = scheduler.table_manager.token_pool
    chunk_cap = cache_manager.prefill_chunk_budget  # a pool's own cap (DSV4); None for these pools
    max_extend_tokens = config.chunked_prefill_size
    scheduler.prefill_budget = min(max_extend_tokens, chunk_cap) if chunk_cap else max_extend_tokens
    scheduler.config = SimpleNamespace(page_size=config.page_size)
    scheduler.status_reporter = SchedulerStatusReporter(log=lambda line: None)
    scheduler.send_result = replies.extend
    return scheduler


@contextlib.contextmanager
def one_torch_thread():
    """The pools' free lists are small tensors concatenated thousands of times: with intra-op threads
    on a busy machine each ``torch.cat`` waits ~1 ms for the pool instead of taking ~20 us."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def quiet_idle_log():
    """``run_when_idle`` logs a line at INFO before each request; keep the driver's output clean."""
    import logging

    import freetoken.scheduler.scheduler as module  # its import sets the logger's level: import first

    logger = logging.getLogger(module.__name__)
    saved = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(saved)


@contextlib.contextmanager
def counter_clock():
    """Replace the wall clock the GDN tree stamps LRU order with by a counter (same order, repeatable)."""
    import freetoken.kvcache.hybrid_radix_cache as hybrid
    import freetoken.kvcache.radix_cache as radix

    ticks = itertools.count(1)
    clock = SimpleNamespace(monotonic_ns=lambda: next(ticks))
    saved = hybrid.time, radix.time
    hybrid.time = radix.time = clock
    try:
        yield
    finally:
        hybrid.time, radix.time = saved


@contextlib.contextmanager
def swa_eviction_interval(interval: int):
    """FreeToken reads FREETOKEN_SWA_EVICTION_INTERVAL once, at import, into this module global."""
    import freetoken.scheduler.cache as cache

    saved = cache._SWA_EVICTION_INTERVAL
    cache._SWA_EVICTION_INTERVAL = interval
    try:
        yield
    finally:
        cache._SWA_EVICTION_INTERVAL = saved
