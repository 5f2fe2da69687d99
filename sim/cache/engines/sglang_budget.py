"""SGLang 0.5.23's prefill and decode memory budget, as arithmetic over token counts.

Each function mirrors one function of SGLang (``mem_cache/prefill_budget.py``, ``managers/schedule_policy.py:
PrefillAdder``, ``managers/schedule_batch.py``) for separate FULL and SWA pools (``SWATokenToKVPoolAllocator``,
no per-request SWA ring) or a FULL pool alone (``PagedTokenToKVPoolAllocator``, FULL + MAMBA models). The
counts come from the caller: ``remaining_total`` is free + evictable FULL tokens less what running requests
may still decode; ``remaining_swa`` is free + evictable SWA tokens, or None when the model has no SWA. Nothing
here reads a pool or a tree.
"""

from __future__ import annotations

from typing import NamedTuple

from sim.align import ceil_to
from sim.cache.results import Refusal, new_refusal
from sim.cache.tuple_new import new_tuple

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: a request's decode is budgeted up to this


class PrefillVerdict(NamedTuple):
    """``check_prefill``'s answer: admit or not, and the cap on the first chunk (None: no cap)."""

    admit: bool
    chunk_cap: int | None


class PassBudget(NamedTuple):
    """One ``PrefillAdder``'s accounts, in tokens: reserved against the whole pool (``total_offset``: the
    running decode and every request added with its decode), against what is free now (``current_offset``),
    against SWA (``swa_offset``), and the chunk and prefill tokens left (``rem_chunk_tokens``,
    ``rem_input_tokens``)."""

    total: int
    current: int
    swa: int
    chunk: int
    input: int


def new_prefill_verdict(admit: bool, chunk_cap: int | None) -> PrefillVerdict:
    return new_tuple(PrefillVerdict, (admit, chunk_cap))  # built natively (sim/cache/tuple_new.py)


def new_pass_budget(total: int, current: int, swa: int, chunk: int, input: int) -> PassBudget:
    return new_tuple(PassBudget, (total, current, swa, chunk, input))


def ceil_page(tokens: int, page: int) -> int:
    return ceil_to(tokens, page)


def max_new_tokens_for_memory(prompt_len: int, max_new_tokens: int, full_pool_tokens: int, page: int) -> int:
    """``Scheduler.init_req_max_new_tokens`` at arrival (``BaseTokenToKVPoolAllocator.max_new_tokens_for_memory``,
    the paged and SWA allocators'): the generation is clipped to what an empty FULL pool holds beside the
    paged prompt, a page and one token; ``max_req_len`` (pool - 1) clips no further. At 0 the request still
    samples its first token and finishes with it."""
    budget = full_pool_tokens - ceil_to(prompt_len, page) - page - 1
    return max(0, min(max_new_tokens, budget))


def clipped_new_tokens(max_new_tokens: int) -> int:
    """``PrefillAdder._swa_new_tokens``: the decode a request still owes, clipped for the estimate."""
    return min(max(max_new_tokens, 0), CLIP_MAX_NEW_TOKENS)


def estimate_swa_kv_tokens(
    extend_len: int, max_new_tokens: int, window: int, page: int, chunk_limit: int | None
) -> int:
    """``estimate_swa_kv_tokens``: the SWA a prefill may hold at its peak. The part of its first chunk
    below the window, plus a window (or less when prompt and decode are shorter), plus a page."""
    allocated = extend_len if chunk_limit is None else min(extend_len, chunk_limit)
    return max(allocated - window, 0) + min(extend_len + max_new_tokens, window) + page


def swa_chunk_cap(remaining_swa: int, max_new_tokens: int, window: int, page: int) -> int:
    """``SWAPrefillBudget._chunk_cap``: the page-floored chunk that leaves room for the decode's window."""
    headroom = estimate_swa_kv_tokens(0, max_new_tokens, window, page, None)
    return max(0, (remaining_swa - headroom) // page * page)


def check_prefill(
    extend_len: int,
    max_new_tokens: int,
    total_tokens: int,
    remaining_total: int,
    remaining_swa: int | None,
    swa_pool_tokens: int,
    window: int,
    page: int,
    chunk_limit: int | None,
) -> PrefillVerdict:
    """``PrefillBudget.check_prefill`` / ``SWAPrefillBudget.check_prefill`` for a new request.

    FULL: ``total_tokens`` (extend + decode + a page) must be strictly below ``remaining_total``. SWA: the
    estimate for the page-ceiled extend must be strictly below ``remaining_swa``; when it is not, only a
    request that could never fit the whole SWA pool (``swa_never_fits``) is admitted, with its chunk capped
    by ``swa_chunk_cap``. Any other shortfall is transient to SGLang: the request waits."""
    if total_tokens >= remaining_total:
        return new_prefill_verdict(False, None)
    if remaining_swa is None:
        return new_prefill_verdict(True, chunk_limit)
    needed = estimate_swa_kv_tokens(ceil_page(extend_len, page), max_new_tokens, window, page, chunk_limit)
    if needed < remaining_swa:
        return new_prefill_verdict(True, chunk_limit)
    cap = swa_chunk_cap(remaining_swa, max_new_tokens, window, page) if needed >= swa_pool_tokens else 0
    if chunk_limit is None or cap <= 0:
        return new_prefill_verdict(False, None)
    return new_prefill_verdict(True, min(chunk_limit, cap))


def new_request_total_tokens(extend_len: int, max_new_tokens: int, page: int) -> int:
    """``PrefillAdder.add_one_req``'s ``total_tokens``: the extend, the clipped decode and one page of
    alignment slack (no MAMBA gap or request-slot reserve with separate pools)."""
    return extend_len + clipped_new_tokens(max_new_tokens) + page


def available_chunk_tokens(
    chunk_limit: int, remaining_total: int, remaining_swa: int | None, page: int
) -> int | None:
    """``available_chunk_tokens`` for a chunked continuation. FULL alone: at most ``remaining_total``, and
    the whole limit when nothing remains (it must progress to release its KV). With SWA: also at most
    ``remaining_swa`` less a page, and None (no chunk this pass) when nothing is left."""
    available = min(chunk_limit, remaining_total)
    if remaining_swa is None:
        return available if available > 0 else chunk_limit
    available = min(available, remaining_swa - page)
    return available if available > 0 else None


def running_decode_offset(remaining_outputs: list[int]) -> int:
    """``PrefillAdder.__init__``'s ``total_offset`` over the running batch: each running request's
    remaining decode, clipped (ratio 1: a trace's output lengths are fixed, as with ``ignore_eos``)."""
    return sum(min(max(remaining, 0), CLIP_MAX_NEW_TOKENS) for remaining in remaining_outputs)


def decode_tokens_needed(kv_len: int, page: int) -> int:
    """``ScheduleBatch.new_tokens_required_next_decode`` for one request: a page when the token it writes
    starts one (``kv_committed_len % page == 0``), else nothing."""
    return page if kv_len % page == 0 else 0


def no_token(pool: str, needed: int, available: int) -> Refusal:
    """``check_prefill``'s refusal as SGLang's ``NO_TOKEN`` (``SGLangAdmission.admission_refusal``)."""
    why = (
        f"SGLang's PrefillAdder answers NO_TOKEN (it would wait forever on an idle server): the request "
        f"needs {needed} {pool} tokens, at most {available} can be freed"
    )
    return new_refusal(pool, needed, available, why)
