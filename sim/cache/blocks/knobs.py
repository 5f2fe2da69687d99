"""vLLM's own knobs (0.33.0): the retention interval, the junction, async scheduling, the GDN prefill backend's
in-chunk checkpoints, the long-prefill cap and max_model_len."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cache.knobs import MAX_INT, knob
from sim.cache.policy import EngineKnobs


@dataclass(frozen=True)
class VllmKnobs(EngineKnobs):
    retention_interval: int | None = knob(
        0,
        "prefix_cache_retention_interval: SWA tails and Mamba states kept at "
        "the prompt's last block boundary and the junction, and every this many "
        "tokens",
        unit="tokens",
        minimum=0,
        maximum=MAX_INT,
        none_means="dense, every block (before vLLM #52216)",
    )
    junction: bool = knob(
        True,
        "the shared-prefix junction (vLLM #37898): a FULL hit beyond the reconciled hit "
        "ends a prefill chunk there and keeps its state",
    )
    async_scheduling: bool = knob(
        True,
        "async scheduling, two batches in flight: blocks leave the window and old "
        "Mamba states go back one step later",
    )
    prefill_checkpoints: bool | None = knob(
        None,
        "GDN prefill on FlashInfer: Mamba states written inside prefill "
        "chunks, blocks aligned to 64 (no effect without GDN layers)",
        none_means="as vLLM picks for --gpu: on Hopper (h100, h200), else off",
    )
    long_prefill_token_threshold: int = knob(
        0,
        "a prefill chunk is at most this many tokens while other requests run or wait (0: no cap)",
        unit="tokens",
        minimum=0,
        maximum=MAX_INT,
    )
    max_model_len: int | None = knob(
        None,
        "vLLM's max_model_len: the start-up check fits one request this long "
        "in the pool; longer requests are refused",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
        none_means="the longest the pool can serve",
    )

    @property
    def batches_in_flight(self) -> int:
        """The batches launched and not yet processed when a step is scheduled, its own included
        (vLLM's ``max_concurrent_batches``): a decode ending at ``e`` has processed ``e - batches_in_flight``
        tokens (the decode paths' ``lag``), and the start-up check counts a token budget per batch."""
        return 2 if self.async_scheduling else 1
