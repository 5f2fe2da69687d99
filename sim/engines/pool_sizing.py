"""Pool sizes from a run's pool options, each size checked and, when refused, named by the option it came
from: a pool per component (SGLang, FreeToken, Marconi), or one byte budget (``--cache-bytes``: Marconi).
vLLM's one shared block pool is sized by its own module (``sim/cache/blocks/sizing.py``)."""

from __future__ import annotations

from contextlib import contextmanager

from sim.cache.byte_budget import byte_budget_sizes
from sim.cache.knobs import MAX_INT
from sim.cache.policy import Policy
from sim.cache.resolve import resolve
from sim.cache.sizing import PoolOptions, PoolSizes, sizes_from_memory, sizes_from_tokens
from sim.models import ModelSpec


class PoolSizeError(ValueError):
    """A pool size no run could use (past the 31-bit limit, or one the sizing refuses), named by its option:
    a sweep refuses its grid up front for one, where an engine's refusal of a combination fails one point."""


def byte_budget(config: PoolOptions, model: ModelSpec, policy: Policy) -> PoolSizes:
    """Pools one byte budget limits (``--cache-bytes``)."""
    assert config.cache_bytes is not None, "asked only when --cache-bytes is given"
    return byte_budget_sizes(model, policy.page_size, int(config.cache_bytes))


def separate_pool_sizes(config: PoolOptions, model: ModelSpec, policy: Policy) -> PoolSizes:
    """A pool per component (SGLang's and FreeToken's layout). FULL and SWA from ``pool_tokens`` (or the memory
    budget); MAMBA states from ``mamba_states`` or, when it is not given, from the memory budget's MAMBA share,
    whichever way the KV pools were sized."""
    page = policy.page_size
    memory = (
        f"--kv-memory-gb {config.kv_memory_gb:g} (split by --swa-full-tokens-ratio "
        f"{config.swa_full_tokens_ratio:g} and --mamba-full-memory-ratio {config.mamba_full_memory_ratio:g})"
    )
    sizes, states = _kv_and_states(config, model, page, memory)
    floor = swa_floor_pages(model, policy) if model.has_swa else 0
    kv_source = memory if config.pool_tokens is None else f"--pool-tokens {config.pool_tokens}"
    _within_limit("FULL", sizes.full_pages * page, "tokens", kv_source)
    _within_limit(
        "SWA",
        sizes.swa_pages * page,
        "tokens",
        kv_source if config.swa_pool_tokens is None else f"--swa-pool-tokens {config.swa_pool_tokens}",
    )
    _within_limit("SWA", floor * page, "tokens", describe_swa_floor(model, policy))
    _within_limit("MAMBA", states, "states", memory if config.mamba_states is None else "--mamba-states")
    return PoolSizes(sizes.full_pages, max(sizes.swa_pages, floor) if model.has_swa else 0, states)


def _kv_and_states(config: PoolOptions, model: ModelSpec, page: int, memory: str) -> tuple[PoolSizes, int]:
    """The KV pools from ``pool_tokens`` or the memory budget, the MAMBA states from ``mamba_states`` or the
    budget's share; an explicit size is not checked against the budget."""
    by_memory = None
    if config.pool_tokens is None or config.mamba_states is None:
        with _named_by(memory):
            by_memory = sizes_from_memory(
                model,
                page,
                int(config.kv_memory_gb * 2**30),
                config.swa_full_tokens_ratio,
                config.mamba_full_memory_ratio,
            )
    kv, states = by_memory, config.mamba_states
    if config.pool_tokens is not None:
        with _named_by(f"--pool-tokens {config.pool_tokens}"):
            kv = sizes_from_tokens(
                page, config.pool_tokens, config.swa_pool_tokens, 0, config.swa_full_tokens_ratio
            )
    if states is None and by_memory is not None:
        states = by_memory.states
    assert kv is not None and states is not None, "the memory budget sizes whatever was not given"
    return kv, states


@contextmanager
def _named_by(option: str):
    """A pool size the sizing refuses, named by the option it came from."""
    try:
        yield
    except ValueError as e:
        raise PoolSizeError(f"{option}: {e}") from None


def _within_limit(pool: str, count: int, unit: str, source: str) -> None:
    """Every pool's token slots (and states) fit in 31 bits, as the executor's tables and the knobs need."""
    if count > MAX_INT:
        raise PoolSizeError(f"{source} gives a {pool} pool of {count} {unit}, more than {MAX_INT}")


def swa_floor_pages(model: ModelSpec, policy: Policy) -> int:
    """Enough SWA for every running request's window and one step's chunk (FreeToken's pool floor);
    ``window+interval`` also covers the retain floor's extra retention (PR #34729's second TODO)."""
    window = resolve(policy, model).window
    extra = policy.track_interval if policy.swa_pool_floor == "window+interval" else 0
    per_request = window + extra + policy.swa_eviction_interval + 2 * policy.page_size
    return (policy.max_running_requests * per_request + policy.chunked_prefill_size) // policy.page_size + 1


def describe_swa_floor(model: ModelSpec, policy: Policy) -> str:
    """The SWA pool floor's terms, named by their options (for a message about its size)."""
    extra = (
        f" + --track-interval {policy.track_interval}" if policy.swa_pool_floor == "window+interval" else ""
    )
    return (
        f"the SWA pool's floor, --max-running-requests {policy.max_running_requests} x (--window "
        f"{resolve(policy, model).window}{extra} + --swa-eviction-interval {policy.swa_eviction_interval} + 2 x "
        f"--page-size {policy.page_size}) + --chunked-prefill-size {policy.chunked_prefill_size},"
    )
