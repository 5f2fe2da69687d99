"""Policy presets: an engine's rules plus knob values, chosen by name; every knob can be overridden.

``make_policy(name, **knobs)`` returns the frozen ``Policy`` the manager runs. A knob that only one engine
reads (``retain_floor``, ``finish_trim_gap``) is refused for a preset of another engine.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sim.cache.knobs import NONE
from sim.cache.policy import KNOBS, Policy, validate

__all__ = ["PRESETS", "Policy", "make_policy", "policy_names"]

_SGLANG = Policy(
    name="sglang",
    engine="sglang",
    about="SGLang 0.5.23 with the SWA retain floor switched off: the behaviour PR #34729 fixed",
)
_FREETOKEN = Policy(
    name="freetoken",
    engine="freetoken",
    page_size=1,
    finish_trim_gap=16,
    swa_free_trigger="iterations",
    iteration_phase=1,
    mamba_chunk=64,
    about="FreeToken 0.2.1 before #200: a finish trims the prompt head's SWA to its last W + 16 tokens",
)

# page 1: Marconi's radix tree is token-granular; vLLM+ keeps its 32-token blocks as pages of 32
_MARCONI = Policy(
    name="marconi",
    engine="marconi",
    page_size=1,
    about="Marconi (MLSys'25): MAMBA states only at branch-off points and last decoded tokens, "
    "FLOP-aware eviction over leaves and single-child nodes, alpha tuned online",
)
# vLLM 0.33.0 as `vllm serve` starts it: --block-size unset (16, raised for Mamba hybrids), the batch defaults
# and the GDN prefill backend of the GPU (settled per --gpu in sim.run.setup.build), retention interval 0
_VLLM = Policy(
    name="vllm",
    engine="vllm",
    page_size=16,
    chunked_prefill_size=8192,
    max_running_requests=1024,
    about="vLLM 0.33.0 defaults: one shared block pool with one free queue, align-mode Mamba, retention "
    "interval 0, the shared-prefix junction, async scheduling",
)


def _variant(base: Policy, name: str, about: str, **knobs: Any) -> Policy:
    return replace(base, name=name, about=about, **knobs)


PRESETS: dict[str, Policy] = {
    preset.name: preset
    for preset in (
        _variant(
            _SGLANG,
            "no-cache",
            "no prefix cache (SGLang --disable-radix-cache): the baseline that reuses nothing",
            engine="none",
        ),
        _variant(
            _SGLANG,
            "radix",
            "a plain FULL-attention radix cache: SWA and MAMBA ignored, the ideal a hybrid can reach",
            full_only=True,
        ),
        _SGLANG,
        _variant(
            _SGLANG,
            "sglang-retain",
            "SGLang 0.5.23 as shipped (PR #34729): SWA kept down to the request's last checkpoint - W",
            retain_floor="request",
        ),
        _variant(
            _SGLANG,
            "sglang-retain-tree",
            "PR #34729's first TODO: the floor from the deepest checkpoint on "
            "the request's tree path, so the prefill region is covered too",
            retain_floor="tree",
        ),
        _FREETOKEN,
        _variant(
            _FREETOKEN,
            "freetoken-lazy",
            "FreeToken PR #488: no finish-time trim; the head goes only when the SWA pool must evict",
            finish_trim_gap=None,
        ),
        _variant(
            _FREETOKEN,
            "freetoken-budget",
            "FreeToken's trim kept with a divergence budget D "
            "(finish_trim_gap) instead of 16, as issue #200 suggests",
            finish_trim_gap=256,
        ),
        _MARCONI,
        _variant(
            _MARCONI,
            "marconi-sglang",
            "Marconi's SGLang+ baseline: its admission, LRU over leaves with whole-path refresh",
            marconi_eviction="lru",
        ),
        _variant(
            _MARCONI,
            "marconi-vllm",
            "Marconi's vLLM+ baseline: a MAMBA state at every 32-token block, LRU over leaf blocks",
            page_size=32,
            marconi_checkpoints="every-page",
            marconi_eviction="lru",
        ),
        _VLLM,
    )
}
_NEGATIVE_CONTROLS = (
    (
        "broken-retain-short",
        "sglang-retain",
        "the retain floor and the match's window one page short, so "
        "second turns read SWA the policy already freed",
        {"window_slack": -1},
    ),
    (
        "broken-stale-state",
        "sglang-retain",
        "a hit resumes from the previous MAMBA checkpoint on its path (or "
        "from zero) instead of the matched one",
        {"fault": "stale-state"},
    ),
    (
        "broken-early-checkpoint",
        "sglang-retain",
        "every prefill checkpoint is saved one token before the position the tree records for it",
        {"fault": "early-checkpoint"},
    ),
    (
        "broken-vllm-hit-past-state",
        "vllm",
        "a Mamba hit accepts the block boundary after a cached state and resumes from that older state",
        {"fault": "vllm-hit-past-state"},
    ),
    (
        "broken-vllm-early-free",
        "vllm",
        "SWA releases one block more than the window allows: a block freed while its KV is still read",
        {"fault": "vllm-early-free"},
    ),
    (
        "broken-freetoken-window-short",
        "freetoken-lazy",
        "freetoken-lazy whose match accepts a window one page short",
        {"window_slack": -1},
    ),
)
for _name, _base, _what, _knobs in _NEGATIVE_CONTROLS:
    PRESETS[_name] = _variant(
        PRESETS[_base], _name, f"DELIBERATELY WRONG, a negative control for `execute`: {_what}", **_knobs
    )


def policy_names() -> list[str]:
    return list(PRESETS)


def make_policy(name: str, **knobs: object) -> Policy:
    """The preset ``name`` with ``knobs`` overriding its defaults: None values are ignored (not given),
    ``"none"`` sets a nullable knob to None."""
    if name not in PRESETS:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(PRESETS)}")
    base = PRESETS[name]
    given = {k: v for k, v in knobs.items() if v is not None}
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise ValueError(f"unknown policy knob(s) {unknown}; known: {', '.join(KNOBS)}")
    for knob in given:
        engines = KNOBS[knob].engines
        if engines is not None and base.engine not in engines:
            raise ValueError(
                f"{KNOBS[knob].flag} applies to {', '.join(engines)} policies only; "
                f"{name!r} runs {base.engine}'s rules"
            )
    overrides: dict[str, Any] = {k: None if v == NONE and KNOBS[k].nullable else v for k, v in given.items()}
    policy = replace(base, **overrides)
    validate(policy)
    return policy
