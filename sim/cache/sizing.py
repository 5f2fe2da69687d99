"""Pool sizes: in pages and states, from token counts or from a memory budget and SGLang's ratios."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sim.align import ceil_div
from sim.models import ModelSpec


class PoolOptions(Protocol):
    """What a run says about its pools (``SimConfig``'s pool options): sizes in tokens or states, or a memory
    budget split by SGLang's ratios, or one byte budget (``cache_bytes``); None: derived."""

    @property
    def pool_tokens(self) -> int | None: ...
    @property
    def swa_pool_tokens(self) -> int | None: ...
    @property
    def mamba_states(self) -> int | None: ...
    @property
    def kv_memory_gb(self) -> float: ...
    @property
    def swa_full_tokens_ratio(self) -> float: ...
    @property
    def mamba_full_memory_ratio(self) -> float: ...
    @property
    def cache_bytes(self) -> float | None: ...


@dataclass(frozen=True)
class PoolSizes:
    full_pages: int
    swa_pages: int
    states: int
    # one byte budget shared by every pool (Marconi's capacity_bytes, sim/cache/byte_budget.py); None: each pool
    # is limited by its own size. unit_bytes: one FULL page, one SWA page, one MAMBA state
    budget_bytes: int | None = None
    unit_bytes: tuple[int, int, int] = (0, 0, 0)
    blocks: int = 0  # one pool every component shares (vLLM): blocks, the null block included

    def __post_init__(self):
        for name in ("full_pages", "swa_pages", "states", "blocks"):
            if getattr(self, name) < 0:
                raise ValueError(f"pool size {name} must be >= 0, got {getattr(self, name)}")
        if self.budget_bytes is not None and self.budget_bytes <= 0:
            raise ValueError(f"byte budget must be > 0, got {self.budget_bytes}")


def sizes_from_tokens(
    page_size: int,
    full_tokens: int,
    swa_tokens: int | None = None,
    states: int = 0,
    swa_full_tokens_ratio: float = 0.8,
) -> PoolSizes:
    """``swa_tokens`` defaults to ``swa_full_tokens_ratio * full_tokens`` as SGLang sizes it."""
    if full_tokens < page_size:
        raise ValueError(f"FULL pool of {full_tokens} tokens holds less than one {page_size}-token page")
    if swa_tokens is None:
        swa_tokens = int(full_tokens * swa_full_tokens_ratio)
    return PoolSizes(full_tokens // page_size, swa_tokens // page_size, states)


def sizes_from_memory(
    model: ModelSpec,
    page_size: int,
    memory_bytes: int,
    swa_full_tokens_ratio: float = 0.8,
    mamba_full_memory_ratio: float = 0.9,
) -> PoolSizes:
    """Split a KV budget as SGLang does: MAMBA takes ``r/(1+r)`` of it, the rest holds FULL tokens
    and ``ratio`` times as many SWA tokens."""
    if memory_bytes <= 0:
        raise ValueError(f"memory budget must be > 0 bytes, got {memory_bytes}")
    state_bytes = model.mamba_state_bytes() if model.has_mamba else 0
    mamba_bytes = memory_bytes * mamba_full_memory_ratio / (1 + mamba_full_memory_ratio) if state_bytes else 0
    kv_bytes = memory_bytes - mamba_bytes
    swa_ratio = swa_full_tokens_ratio if model.has_swa else 0.0
    per_token = model.full_kv_bytes_per_token() + swa_ratio * model.swa_kv_bytes_per_token()
    full_tokens = int(kv_bytes // per_token)
    states = int(mamba_bytes // state_bytes) if state_bytes else 0
    return sizes_from_tokens(page_size, full_tokens, int(full_tokens * swa_ratio), states)


def sequence_refusal(total_len: int, page_size: int, states_needed: int, sizes: PoolSizes) -> str | None:
    """Why a request of ``total_len`` tokens (prompt + output) can never run in pools of ``sizes``: what
    admission asks of them, its whole sequence in FULL pages and the engine's MAMBA states per admitted
    request, or None."""
    pages = ceil_div(total_len, page_size)
    if pages > sizes.full_pages:
        return f"needs {pages} FULL pages, the pool has {sizes.full_pages}"
    if states_needed > sizes.states:
        return (
            f"needs {states_needed} MAMBA states (the running state + {states_needed - 1} checkpoint slots), the "
            f"pool has {sizes.states}"
        )
    return None
