"""A run's summary (SPEC section 6) as one typed record: reuse, time, pools, the gap to the ideal, why tokens
were recomputed, and the offline bounds.

Each section is computed by its own module and handed over as keyword arguments, so a missing or unknown
figure is an error at the run's end, not a KeyError in a report. ``as_dict()`` is the flat JSON object
(``summary.json``, a grid point, ``--format json``); figures a run does not have (vLLM's ``capacity_blocks``,
the bounds of a run that skipped them) are left out of it. The ``Mapping`` methods read the same flat
names, so a summary and one loaded back from JSON are read alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Summary(Mapping[str, object]):
    # reuse over the served requests
    requests: int
    rejected_requests: int
    prompt_tokens: int
    cached_tokens: int
    recomputed_tokens: int
    blocked_tokens: int
    mean_reuse_fraction: float
    hits: int
    followup_requests: int
    decode_region_hits: int
    # time (0 in replay mode)
    makespan_s: float
    output_tokens_per_s: float
    mean_ttft_s: float
    retractions: int
    num_steps: int
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    e2e_p50_s: float
    e2e_p90_s: float
    e2e_p99_s: float
    # pools: held (KV in token slots, MAMBA in states), capacity, evictions
    peak_full_slots: int
    mean_full_slots: float
    peak_swa_slots: int
    mean_swa_slots: float
    peak_mamba_states: int
    mean_mamba_states: float
    capacity_full_slots: int
    capacity_swa_slots: int
    capacity_mamba_states: int
    capacity_blocks: int | None = None  # one shared block pool (vLLM)
    evictions_full: int
    evictions_swa: int
    evictions_mamba: int
    # the gap to an infinite FULL cache at page 1 (sim/bounds/upper_bound.py)
    ideal_cached_tokens: int
    ideal_decode_region_hits: int
    gap_evicted_tokens: int
    gap_never_kept_tokens: int
    gap_blocked_tokens: int
    # recomputed tokens by reason (sim/run/why.py REASONS); they add up to recomputed_tokens
    why_mamba_state_tokens: int
    why_mamba_evicted_tokens: int
    why_swa_trigger_tokens: int
    why_swa_finish_trim_tokens: int
    why_swa_eviction_tokens: int
    why_blocked_other_tokens: int
    why_never_kept_tokens: int
    why_full_evicted_tokens: int
    why_not_cached_tokens: int
    why_page_rounding_tokens: int
    why_new_tokens: int
    # the offline bounds (sim/bounds/), or why they were skipped
    bound_belady_tokens: int | None = None
    bound_tokens: int | None = None
    cached_of_bound: float | None = None
    bound_skipped: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The flat JSON object, in field order, without the figures this run does not have."""
        return {f.name: getattr(self, f.name) for f in _FIELDS if getattr(self, f.name) is not None}

    def __getitem__(self, name: str) -> object:
        value = getattr(self, name, None) if name in _NAMES else None
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


_FIELDS = dataclasses.fields(Summary)
_NAMES = frozenset(f.name for f in _FIELDS)
