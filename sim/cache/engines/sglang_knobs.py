"""SGLang's own knobs (the SWA retain floor, the overlap loop, the schedule policy, mixed chunks), apart from its rules: knobs are read once per run, and the
compiled core (``sim/compiled_core.py``) leaves them interpreted (mypyc cannot compile a dataclass whose base
is an interpreted class)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cache.engines.base import overlap_knob
from sim.cache.knobs import knob
from sim.cache.policy import EngineKnobs

# --schedule-policy values modelled (sim/sched/sglang_policy.py); random is not deterministic, dfs-weight not done
SCHEDULE_POLICIES = ("fcfs", "lpm", "lof", "dfs-weight", "hrrn")


@dataclass(frozen=True)
class SGLangKnobs(EngineKnobs):
    retain_floor: str | None = knob(
        None,
        "SWA retain floor: none (before PR #34729), request (#34729), tree (its first TODO)",
        choices=(None, "request", "tree"),
    )
    overlap: bool = overlap_knob()
    schedule_policy: str = knob(
        "fcfs",
        "--schedule-policy: the waiting queue's order: fcfs (arrival), lpm (longest prefix match first, "
        "in-batch prefix caching), lof (longest output first), dfs-weight (the tree depth first, heaviest "
        "subtree first), hrrn (highest ratio of prefill tokens processed while waiting to tokens to prefill)",
        choices=SCHEDULE_POLICIES,
    )
    mixed_chunk: bool = knob(
        False,
        "--enable-mixed-chunk: the running requests' decode rides in the prefill batch (and is charged to the "
        "pass's chunk and memory budgets) instead of waiting for a decode batch",
    )
