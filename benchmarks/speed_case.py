"""One speed case in this process, pure Python or the compiled core: what ``presets_speed.py`` runs in a fresh
interpreter per case (so peak RSS and the imported build are the case's own).

    python benchmarks/speed_case.py '{"preset": "vllm", "mode": "replay", "limit": 4000, ...}'

prints one JSON object: the simulation's CPU and wall seconds, the whole process's CPU seconds (interpreter,
imports and trace load included), peak RSS, and the reused tokens (equal across builds: a check). The case's
``build`` is ``pure`` (the sources) or ``compiled`` (the tree ``scripts/build_compiled.py`` writes, put first
on ``sys.path``; the case fails if a hot module still loads from source).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HOT_PROBE = "sim.cache.tree"  # a module the compiled build always compiles


@dataclass(frozen=True)
class SpeedCase:
    preset: str
    mode: str  # replay | timed
    bounds: bool
    build: str  # pure | compiled
    trace: str  # a Mooncake JSONL path (imported with chains), or "fanout:N" (N synthetic requests)
    limit: int | None = None
    compiled_dir: str = str(REPO_ROOT / "build" / "compiled")


@dataclass(frozen=True)
class SpeedResult:
    case: SpeedCase
    num_requests: int
    sim_cpu_s: float
    sim_wall_s: float
    process_cpu_s: float
    peak_rss_mib: float
    cached_tokens: int


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load_trace(case: SpeedCase):
    if case.trace.startswith("fanout:"):
        from sim.trace.generate import fanout

        num_requests = int(case.trace.split(":", 1)[1])
        groups = max(num_requests // 1000, 1)  # groups of 1000 prompts sharing a system prompt
        return fanout(num_groups=groups, prompts_per_group=num_requests // groups)
    from sim.trace.azure_import import import_mooncake

    return import_mooncake(case.trace, limit=case.limit, chains=True)


def run(case: SpeedCase) -> SpeedResult:
    # the checkout first: ``sim/__init__`` takes the build the variable names and refuses one built from other
    # sources (the build's own copy first on the path would only be checked against itself)
    if case.build == "compiled":
        os.environ["HYBRIDCACHE_COMPILED"] = case.compiled_dir
    else:
        os.environ.pop("HYBRIDCACHE_COMPILED", None)
    sys.path.insert(0, str(REPO_ROOT))
    import importlib

    probe = importlib.import_module(HOT_PROBE)
    if (case.build == "compiled") != (not str(probe.__file__).endswith(".py")):
        raise SystemExit(f"error: build {case.build!r} asked, but {HOT_PROBE} loads from {probe.__file__}")
    from sim.run.simulate import SimConfig, simulate

    trace = load_trace(case)
    cpu, wall = time.process_time(), time.perf_counter()
    result = simulate(trace, SimConfig(policy=case.preset, mode=case.mode, bounds=case.bounds))
    sim_cpu, sim_wall = time.process_time() - cpu, time.perf_counter() - wall
    return SpeedResult(
        case,
        len(trace),
        sim_cpu,
        sim_wall,
        _process_cpu_s(),
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        int(result.summary["cached_tokens"]),
    )


if __name__ == "__main__":
    print(json.dumps(asdict(run(SpeedCase(**json.loads(sys.argv[1]))))))
