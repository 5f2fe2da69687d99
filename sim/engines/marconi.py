"""Marconi (MLSys'25) and its SGLang+ / vLLM+ baselines: selective MAMBA admission, FLOP-aware eviction,
one byte budget for every pool (``--cache-bytes``) or SGLang's pools."""

from __future__ import annotations

from dataclasses import replace

from sim.cache.engines.marconi import MarconiRules
from sim.cache.engines.marconi_knobs import MarconiKnobs
from sim.cache.policy import Policy
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import capped_scheduler, decode_interval_on_pages, radix_manager

# page 1: Marconi's radix tree is token-granular; vLLM+ keeps its 32-token blocks as pages of 32
_MARCONI = Policy(
    name="marconi",
    engine="marconi",
    page_size=1,
    about="Marconi (MLSys'25): MAMBA states only at branch-off points and last decoded tokens, "
    "FLOP-aware eviction over leaves and single-child nodes, alpha tuned online",
    own=MarconiKnobs(),
)

ENGINE = Engine(
    name="marconi",
    about="Marconi: states at branch-off points and last tokens, recency + alpha x FLOP efficiency",
    knobs=MarconiKnobs,
    presets=(
        _MARCONI,
        replace(
            _MARCONI,
            name="marconi-sglang",
            about="Marconi's SGLang+ baseline: its admission, LRU over leaves with whole-path refresh",
            own=MarconiKnobs(marconi_eviction="lru"),
        ),
        replace(
            _MARCONI,
            name="marconi-vllm",
            about="Marconi's vLLM+ baseline: a MAMBA state at every 32-token block, LRU over leaf blocks",
            page_size=32,
            own=MarconiKnobs(marconi_checkpoints="every-page", marconi_eviction="lru"),
        ),
    ),
    manager=radix_manager(MarconiRules),
    scheduler=capped_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=MarconiRules,
    check=decode_interval_on_pages,
    byte_budget=True,
)
