"""Why a prompt token was recomputed: the reasons of the ``why`` column (``sim/run/why.py`` says what each
range means) and a reason's range of positions."""

from __future__ import annotations

MAMBA_STATE, MAMBA_EVICTED = "mamba_state", "mamba_evicted"
SWA_TRIGGER, SWA_FINISH_TRIM, SWA_EVICTION = "swa_trigger", "swa_finish_trim", "swa_eviction"
RETENTION = "retention"  # vLLM: computed, but its retention interval left the state / window block unhashed
NEVER_KEPT, FULL_EVICTED, NOT_CACHED = "never_kept", "full_evicted", "not_cached"
PAGE_ROUNDING, NEW = "page_rounding", "new"
# a blocked range the watched events do not explain: an engine whose cache has no watcher, or a rule its
# watcher does not mirror; 0 for every built-in engine (tests/test_why_engines.py)
BLOCKED_OTHER = "blocked_other"
REASONS = {
    MAMBA_STATE: "no MAMBA state at the match point",
    MAMBA_EVICTED: "MAMBA state evicted",
    SWA_TRIGGER: "SWA freed by the trigger",
    SWA_FINISH_TRIM: "SWA freed by the finish-time trim",
    SWA_EVICTION: "SWA evicted (pool space)",
    RETENTION: "not kept by the retention interval",
    BLOCKED_OTHER: "blocked, other",
    NEVER_KEPT: "never kept by the previous turn",
    FULL_EVICTED: "FULL evicted",
    NOT_CACHED: "not cached yet",
    PAGE_ROUNDING: "page rounding",
    NEW: "new tokens",
}
Range = tuple[int, int, str]  # [start, end) and its reason
