"""The engine knobs the boundary and concurrent families draw beyond the one-at-a-time generator's, each as its
engine allows (docs/conformance.md lists every knob an engine entry accepts and which family draws it):

- SGLang: the Mamba chunk (the model's ``mamba_chunk_size``: FLA's 64 for GDN models, 256 for Nemotron-H,
  Falcon-H1 and Granite 4, 128 where a Mamba2 config sets it; ``mamba_cache_chunk_size`` needs it and the page
  to divide one another, and the extra buffer a track interval no shorter than it:
  ``HybridLinearAttnBackend``), the SWA eviction interval (``SGLANG_SWA_EVICTION_INTERVAL``), and its loop:
  the overlap loop, ``--schedule-policy``, ``--enable-mixed-chunk``; ``--max-running-requests``;
- FreeToken: the SWA eviction interval (its GDN scan chunk is fixed: ``CHUNK_SIZE`` = 64);
- vLLM: ``long_prefill_token_threshold``, ``--max-num-seqs`` (its Mamba block is its block size in align mode, the only mode
  with prefix caching: ``_align_hybrid_block_size``).

Drawn from a stream of their own, so the rest of a seed's scenario is drawn as before.
"""

from __future__ import annotations

import random
from dataclasses import replace

from conformance.scenario import EngineConfig

SGLANG_MAMBA_CHUNKS = (64, 64, 128, 256)
SWA_EVICTION_INTERVALS = (128, 128, 16, 32, 64, 256)


def knob_stream(family: str, engine: str, seed: int, pressure: bool) -> random.Random:
    return random.Random(f"{family}/{engine}/{seed}/{pressure}/knobs")


def mamba_chunk(rng: random.Random, engine: str) -> int:
    """The scan chunk a hybrid model brings: SGLang serves the Mamba2 families too; FreeToken fixes 64."""
    return rng.choice(SGLANG_MAMBA_CHUNKS) if engine == "sglang" else 64


def with_mamba_chunk(rng: random.Random, engine: str, config: EngineConfig) -> EngineConfig:
    """A drawn configuration (chunk 64) with the model's chunk drawn: the track interval raised to it where
    shorter (SGLang's extra buffer refuses a shorter one; both are multiples of the page)."""
    if not config.has_mamba:
        return config
    chunk = mamba_chunk(rng, engine)
    return replace(config, mamba_chunk=chunk, track_interval=max(config.track_interval, chunk))


def with_swa_interval(rng: random.Random, engine: str, config: EngineConfig) -> EngineConfig:
    """SGLang's and FreeToken's SWA eviction interval (the boundary family's was fixed at 128)."""
    if engine == "vllm" or not config.has_swa:
        return config
    return replace(config, swa_eviction_interval=rng.choice(SWA_EVICTION_INTERVALS))


def with_sglang_loop(rng: random.Random, engine: str, config: EngineConfig) -> EngineConfig:
    """SGLang's loop: the overlap loop in 70%, the schedule policy, mixed chunks in 25%."""
    if engine != "sglang":
        return config
    return replace(
        config,
        overlap=rng.random() < 0.7,
        schedule_policy=rng.choice(("fcfs", "fcfs", "lpm", "lof")),
        mixed_chunk=rng.random() < 0.25,
    )


def with_max_running(rng: random.Random, engine: str, config: EngineConfig) -> EngineConfig:
    """SGLang's --max-running-requests and vLLM's --max-num-seqs (at most max_num_batched_tokens, as vLLM
    requires) in a quarter of scenarios; FreeToken's floors are sized for its default of 4."""
    if engine == "freetoken" or rng.random() >= 0.25:
        return config
    cap = rng.choice((1, 2, 3, 4, 8))
    return replace(config, max_running=min(cap, config.chunked_prefill_size) if engine == "vllm" else cap)


def long_prefill_threshold(rng: random.Random, config: EngineConfig) -> int:
    """vLLM's cap on a prefill chunk while others run or wait, in 20% of scenarios: at most max_model_len."""
    threshold = config.page_size * rng.choice((1, 2, 4, 8)) if rng.random() < 0.2 else 0
    return min(threshold, config.max_model_len)
