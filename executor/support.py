"""What the executor runs: every model preset, and every policy but the ones no real cache could serve.

``execute_refusal(policy)`` is the one place that decides whether ``execute`` runs a policy; the command
asks it while parsing its options, so a policy is either executed or refused before anything runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.models import MAMBA, ModelSpec

if TYPE_CHECKING:
    from sim.cache.policy import Policy


def execute_refusal(policy: "Policy") -> str | None:
    """Why ``execute`` cannot run ``policy`` (None: it runs it and checks every reuse bit for bit): the
    policy's engine entry may refuse every preset of it (``Engine.executes``); a FULL-only preset is refused."""
    from sim.engines.registry import engine_of

    refusal = engine_of(policy).executes
    if refusal is not None:
        return refusal.format(policy=policy.name)
    if policy.full_only:
        return (
            f"policy {policy.name!r} reuses FULL KV alone and keeps no SWA or MAMBA state: it is the upper "
            "bound a hybrid cache could reach, not a cache a hybrid model can run (its hits would read SWA "
            "KV and states it never kept); `simulate` reports it"
        )
    return None


def check_supported(spec: ModelSpec) -> None:
    """A model the executor cannot lay out in memory is refused by name."""
    if spec.sconv_dims and spec.num_layers(MAMBA):
        raise ValueError(
            f"model {spec.name!r}: short-conv streams (sconv_dims) beside MAMBA layers: the executor keeps "
            "one kind of state per layer"
        )
