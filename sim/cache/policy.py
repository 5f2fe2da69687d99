"""A policy: which engine runs, the value of every knob the engines share, and the engine's own knobs.

The shared knobs are declared here, once; an engine's own knobs are a dataclass of ``knob()`` fields beside its
rules (``EngineKnobs``: SGLang's ``retain_floor``, FreeToken's trim and overlap, Marconi's, vLLM's), carried as
``Policy.own``. ``Policy`` is model-independent (a preset plus overrides, as a grid point stores it);
``resolve`` settles it against a model once (``sim/cache/resolve.py``). The schema over every engine (CLI
options, grid axes, ``cli.py policies``) is assembled by the engine registry (``sim/engines/``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sim.cache.knobs import MAX_INT, KnobSpec, knob, knob_specs


@dataclass(frozen=True)
class EngineKnobs:
    """An engine's own knobs: subclassed by each engine as a frozen dataclass of ``knob()`` fields. The
    base, without fields, is the knobs of an engine that has none of its own."""

    @classmethod
    def specs(cls) -> dict[str, KnobSpec]:
        return _specs_of(cls)

    def values(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.specs()}


_SPECS: dict[type, dict[str, KnobSpec]] = {}


def _specs_of(cls: type) -> dict[str, KnobSpec]:
    if cls not in _SPECS:
        _SPECS[cls] = knob_specs(cls)
    return _SPECS[cls]


K = TypeVar("K", bound=EngineKnobs)


@dataclass(frozen=True)
class Policy:
    name: str
    engine: str  # the rules module in sim/cache/engines/
    about: str = ""  # which engine version or PR the preset models
    full_only: bool = False  # the cache keeps FULL alone (SWA and MAMBA ignored): the ideal FULL engine
    page_size: int = knob(
        64,
        "radix page: keys, pages, checkpoints and the SWA frontier align to it",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
    )
    track_interval: int = knob(
        256, "MAMBA decode checkpoint interval", unit="tokens", minimum=1, maximum=MAX_INT
    )
    window: int | None = knob(
        None, "SWA window", unit="tokens", minimum=0, maximum=MAX_INT, none_means="the model's"
    )
    mamba_chunk: int | None = knob(
        None,
        "the scan's chunk: prefill checkpoints land on its multiples",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
        none_means="the model's",
    )
    chunked_prefill_size: int = knob(
        8192,
        "prefill tokens per engine step; longer prompts are chunked",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
    )
    max_running_requests: int = knob(64, "requests running at once, at most", minimum=1, maximum=MAX_INT)
    swa_free_trigger: str = knob(
        "tokens",
        "when decode frees out-of-window SWA: per request every interval "
        "tokens, or on every interval-th engine iteration",
        choices=("tokens", "iterations"),
    )
    swa_eviction_interval: int = knob(
        128, "the SWA free trigger's interval", unit="tokens or iterations", minimum=1, maximum=MAX_INT
    )
    iteration_phase: int = knob(
        0, "global iteration index of the first engine step (iterations trigger)", minimum=0, maximum=MAX_INT
    )
    swa_pool_floor: str = knob(
        "window", "per-request SWA pool floor when pools are sized", choices=("window", "window+interval")
    )
    # deliberately wrong, to prove the executor catches it: the retain floor keeps this many tokens less and
    # the match accepts a window this much short (-1: one page)
    window_slack: int = knob(
        0, "DELIBERATELY WRONG: window shortfall", minimum=-1, maximum=MAX_INT, hidden=True
    )
    fault: str | None = knob(
        None,
        "DELIBERATELY WRONG MAMBA handling (vllm-*: vLLM's block manager's hit or SWA release)",
        choices=(None, "stale-state", "early-checkpoint", "vllm-hit-past-state", "vllm-early-free"),
        hidden=True,
    )

    own: EngineKnobs = field(default_factory=EngineKnobs)  # the engine's own knobs

    def knob_items(self, hidden: bool = False) -> dict[str, object]:
        """Every knob this policy's engine reads, as set: the shared ones, then the engine's own, then (with
        ``hidden``) the deliberately wrong ones of the negative controls."""
        shared = {name: getattr(self, name) for name, spec in SHARED_KNOBS.items() if not spec.hidden}
        wrong = {name: getattr(self, name) for name, spec in SHARED_KNOBS.items() if spec.hidden and hidden}
        return shared | self.own.values() | wrong

    def knob_specs(self) -> dict[str, KnobSpec]:
        """The schema of every knob this policy's engine reads (the hidden ones included)."""
        return SHARED_KNOBS | self.own.specs()

    def with_knobs(self, **values: Any) -> Policy:
        """This policy with knobs set (shared or the engine's own); ValueError for a knob it does not have."""
        own = {name: value for name, value in values.items() if name in self.own.specs()}
        shared = {name: value for name, value in values.items() if name in SHARED_KNOBS}
        unknown = sorted(set(values) - set(own) - set(shared))
        if unknown:
            raise ValueError(f"{self.engine} has no knob(s) {unknown}")
        return dataclasses.replace(self, own=dataclasses.replace(self.own, **own), **shared)


SHARED_KNOBS = knob_specs(Policy)


def own_knobs(policy: Policy, kind: type[K]) -> K:
    """The policy's own knobs as the rules of ``kind``'s engine read them: the policy's where they are of that
    kind, else that kind's defaults (an engine whose rules derive from another's: no-cache from SGLang)."""
    return policy.own if isinstance(policy.own, kind) else kind()


def validate(policy: Policy) -> None:
    """ValueError naming the knob when a value is not allowed (the engine checks combinations itself)."""
    for name, spec in policy.knob_specs().items():
        value = getattr(policy, name) if name in SHARED_KNOBS else getattr(policy.own, name)
        try:
            spec.check(value)
        except ValueError as e:
            raise ValueError(f"policy knob {name} {e}") from None
