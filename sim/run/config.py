"""What one simulation runs: policy and knobs, model, GPU, pools, mode (``SimConfig``).

Kept apart from ``simulate`` so that the command line and the grid axes read the pool knobs' schema
without loading pandas or SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.cache.knobs import MAX_INT, knob, knob_specs


@dataclass(frozen=True)
class SimConfig:
    policy: str = "sglang-retain"
    model: str = "inkling"
    gpu: str = "h200"
    knobs: dict = field(default_factory=dict)  # policy knobs (page_size, track_interval, window, ...)
    pool_tokens: int | None = knob(
        None, "FULL pool size", unit="tokens", minimum=1, maximum=MAX_INT, none_means="from --kv-memory-gb"
    )
    swa_pool_tokens: int | None = knob(
        None,
        "SWA pool size",
        unit="tokens",
        minimum=0,
        maximum=MAX_INT,
        none_means="--swa-full-tokens-ratio x FULL",
    )
    mamba_states: int | None = knob(
        None,
        "MAMBA pool size",
        unit="states",
        minimum=0,
        maximum=MAX_INT,
        none_means="the memory budget's MAMBA share",
    )
    kv_memory_gb: float = knob(
        40.0, "memory for the cache pools", unit="GiB", minimum=0, exclusive_minimum=True, maximum=1e6
    )
    swa_full_tokens_ratio: float = knob(
        0.8,
        "SWA pool tokens per FULL pool token (SGLang's ratio)",
        minimum=0,
        exclusive_minimum=True,
        maximum=1e6,
    )
    mamba_full_memory_ratio: float = knob(
        0.9, "MAMBA memory per KV memory (SGLang's ratio)", minimum=0, exclusive_minimum=True, maximum=1e6
    )
    cache_bytes: float | None = knob(
        None,
        "one byte budget for KV and MAMBA states together, as Marconi sizes its cache (marconi policies)",
        unit="bytes",
        minimum=1,
        maximum=1e18,
        none_means="the engine's pools, sized by the options above",
    )
    request_rate_scale: float = knob(
        1.0,
        "open-loop arrivals this many times as fast (arrival times divided by it; think times kept): a load "
        "sweep without rewriting the trace",
        minimum=0,
        exclusive_minimum=True,
        maximum=1e6,
    )
    calibration: str | None = None
    slo: str | None = None  # "ttft=S,tpot=S[,e2e=S][,attainment=F]": goodput and attainment (sim/run/slo.py)
    mode: str = "timed"  # "timed": the SimPy engine; "replay": requests one after another, no time
    bounds: bool = True  # the offline bounds beside the result (sim/bounds/): as long again as the run itself

    def __post_init__(self):
        if self.mode not in ("timed", "replay"):
            raise ValueError(f"mode must be 'timed' or 'replay', got {self.mode!r}")
        if self.slo is not None:
            from sim.run.slo import parse_slo  # its own module: this one stays light for the command line

            parse_slo(self.slo)
        for name, spec in POOL_KNOBS.items():
            try:
                spec.check(getattr(self, name))
            except ValueError as e:
                raise ValueError(f"{spec.flag} {e}") from None


POOL_KNOBS = knob_specs(SimConfig)
