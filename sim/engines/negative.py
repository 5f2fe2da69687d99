"""The negative controls: presets deliberately wrong in one way each, so that ``execute`` proves it catches
such a mistake (every one must be flagged not bit-exact)."""

from __future__ import annotations

from dataclasses import replace

from sim.cache.policy import Policy

CONTROLS = (
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


def negative_controls(presets: dict[str, Policy]) -> list[Policy]:
    return [
        replace(
            presets[base],
            name=name,
            about=f"DELIBERATELY WRONG, a negative control for `execute`: {what}",
            **knobs,
        )
        for name, base, what, knobs in CONTROLS
    ]
