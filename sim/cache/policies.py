"""Cache policy presets: each a small object, chosen by name; every knob can be overridden.

A preset fixes an engine's rules (when SWA is freed, where checkpoints land, what a finish keeps) and
default knobs; ``make_policy(name, **knobs)`` returns the frozen ``Policy`` the manager runs.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

SGLANG_RULES, FREETOKEN_RULES = "sglang", "freetoken"


@dataclass(frozen=True)
class Policy:
    name: str
    about: str = ""  # which engine version or PR the preset models
    rules: str = SGLANG_RULES  # which engine's SWA-freeing and checkpoint rules
    cache_enabled: bool = True  # False: the no-cache baseline (nothing matched, nothing kept)
    full_only: bool = False  # True: plain FULL radix, SWA and MAMBA ignored (the ideal FULL engine)
    page_size: int = 64
    track_interval: int = 256  # decode checkpoint spacing (MAMBA)
    window: int | None = None  # None: the model's window
    mamba_chunk: int | None = None  # None: the model's scan chunk
    swa_eviction_interval: int = 128
    swa_free_trigger: str = "tokens"  # "tokens" (per request) | "iterations" (global cadence)
    retain_floor: str | None = None  # None | "request" (PR #34729) | "tree" (its first TODO)
    finish_trim_gap: int | None = None  # FreeToken: keep SWA only for [prompt - W - gap, prompt) at finish
    commit_every_chunk: bool = True  # SGLang inserts after every prefill chunk; FreeToken after the last
    swa_refresh: str = "window"  # LRU refresh of SWA on a hit: "window" (SGLang) | "path" (FreeToken)
    swa_pool_floor: str = "window"  # per-request SWA pool floor: "window" | "window+interval"
    chunked_prefill_size: int = 8192
    max_running_requests: int = 64
    iteration_phase: int = 0  # global iteration index of the first step ("iterations" trigger)
    # deliberately wrong, to prove the executor catches it: the retain floor keeps this many tokens less
    # and the match accepts a window this much short (-1: one page)
    window_slack: int = 0
    # deliberately wrong MAMBA handling, for the same purpose: "stale-state" resumes a hit from the previous
    # checkpoint on the path instead of the matched one; "early-checkpoint" saves each prefill checkpoint one
    # token before the position the tree records for it
    fault: str | None = None

    def knob_names(self) -> list[str]:
        return [f.name for f in fields(self) if f.name not in ("name", "about", "rules")]


_SGLANG = Policy(name="sglang", about="SGLang 0.5.23 with the SWA retain floor switched off: the behaviour "
                                     "PR #34729 fixed")

PRESETS: dict[str, Policy] = {
    "no-cache": replace(_SGLANG, name="no-cache", cache_enabled=False,
                        about="no prefix cache (SGLang --disable-radix-cache): the baseline that reuses nothing"),
    "radix": replace(_SGLANG, name="radix", full_only=True,
                     about="a plain FULL-attention radix cache: SWA and MAMBA ignored, the ideal a hybrid can reach"),
    "sglang": _SGLANG,
    "sglang-retain": replace(_SGLANG, name="sglang-retain", retain_floor="request",
                             about="SGLang 0.5.23 as shipped (PR #34729): SWA kept down to the request's last "
                                   "checkpoint - W"),
    "sglang-retain-tree": replace(_SGLANG, name="sglang-retain-tree", retain_floor="tree",
                                  about="PR #34729's first TODO: the floor from the deepest checkpoint on the "
                                        "request's tree path, so the prefill region is covered too"),
    "freetoken": Policy(name="freetoken", rules=FREETOKEN_RULES, page_size=1, finish_trim_gap=16,
                        commit_every_chunk=False, swa_refresh="path", swa_free_trigger="iterations",
                        mamba_chunk=64, about="FreeToken 0.2.1 before #200: a finish trims the prompt head's SWA "
                                              "to its last W + 16 tokens"),
}
PRESETS["freetoken-lazy"] = replace(PRESETS["freetoken"], name="freetoken-lazy", finish_trim_gap=None,
                                    about="FreeToken PR #488: no finish-time trim; the head goes only when the SWA "
                                          "pool must evict")
PRESETS["freetoken-budget"] = replace(PRESETS["freetoken"], name="freetoken-budget", finish_trim_gap=256,
                                      about="FreeToken's trim kept with a divergence budget D (finish_trim_gap) "
                                            "instead of 16, as issue #200 suggests")
PRESETS["broken-retain-short"] = replace(
    PRESETS["sglang-retain"], name="broken-retain-short", window_slack=-1,
    about="DELIBERATELY WRONG, a negative control for `execute`: the retain floor and the match's window "
          "one page short, so second turns read SWA the policy already freed")

PRESETS["broken-stale-state"] = replace(
    PRESETS["sglang-retain"], name="broken-stale-state", fault="stale-state",
    about="DELIBERATELY WRONG, a negative control for `execute`: a hit resumes from the previous MAMBA "
          "checkpoint on its path (or from zero) instead of the matched one")
PRESETS["broken-early-checkpoint"] = replace(
    PRESETS["sglang-retain"], name="broken-early-checkpoint", fault="early-checkpoint",
    about="DELIBERATELY WRONG, a negative control for `execute`: every prefill checkpoint is saved one token "
          "before the position the tree records for it")
PRESETS["broken-freetoken-window-short"] = replace(
    PRESETS["freetoken-lazy"], name="broken-freetoken-window-short", window_slack=-1,
    about="DELIBERATELY WRONG, a negative control for `execute`: freetoken-lazy whose match accepts a window "
          "one page short")

_CHOICES = {"fault": (None, "stale-state", "early-checkpoint"), "swa_free_trigger": ("tokens", "iterations"), "retain_floor": (None, "request", "tree"),
            "swa_refresh": ("window", "path"), "swa_pool_floor": ("window", "window+interval")}
_POSITIVE = ("page_size", "track_interval", "swa_eviction_interval", "chunked_prefill_size",
             "max_running_requests")


def policy_names() -> list[str]:
    return list(PRESETS)


def make_policy(name: str, **knobs) -> Policy:
    """The preset ``name`` with ``knobs`` (None values ignored) overriding its defaults."""
    if name not in PRESETS:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(PRESETS)}")
    base = PRESETS[name]
    unknown = set(knobs) - set(base.knob_names())
    if unknown:
        raise ValueError(f"unknown policy knob(s) {sorted(unknown)}; known: {', '.join(base.knob_names())}")
    policy = replace(base, **{k: v for k, v in knobs.items() if v is not None})
    validate(policy)
    return policy


def validate(policy: Policy) -> None:
    for knob in _POSITIVE:
        if getattr(policy, knob) <= 0:
            raise ValueError(f"policy knob {knob} must be > 0, got {getattr(policy, knob)}")
    for knob, allowed in _CHOICES.items():
        if getattr(policy, knob) not in allowed:
            raise ValueError(f"policy knob {knob} must be one of {allowed}, got {getattr(policy, knob)!r}")
    if policy.track_interval % policy.page_size:
        raise ValueError(f"track_interval {policy.track_interval} must be a multiple of page_size "
                         f"{policy.page_size}")
    for knob in ("window", "mamba_chunk", "finish_trim_gap"):
        value = getattr(policy, knob)
        if value is not None and value < 0:
            raise ValueError(f"policy knob {knob} must be >= 0, got {value}")
    if policy.window_slack < -1:
        raise ValueError(f"policy knob window_slack must be >= -1, got {policy.window_slack}")
    if policy.iteration_phase < 0:
        raise ValueError(f"policy knob iteration_phase must be >= 0, got {policy.iteration_phase}")
