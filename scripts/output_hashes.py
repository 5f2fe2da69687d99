"""Hash a checkout's tables on the first N requests of the real Mooncake conversation trace, one line a case.

The quick proof behind the speed branches (docs/results/presets-speed.md): a change meant to alter no output
must print the same `req=` / `steps=` / `sum=` hashes before and after; `cpu=` is the simulation's CPU seconds
and is expected to differ. `scripts/output_fingerprint.py` stays the whole proof (CLI printouts, experiments,
grids); this one covers every preset, both modes, with and without bounds, on a longer real trace in minutes.

    python scripts/output_hashes.py 1000                       # every sound preset x replay/timed x bounds off/on
    python scripts/output_hashes.py 1000 vllm:replay vllm:timed:bounds   # chosen cases, policy:mode[:bounds]
    python scripts/output_hashes.py 1000 > A.txt; ...; python scripts/compare_hashes.py A.txt B.txt

(`cut -d' ' -f1-4` is no comparison: the case name is padded with spaces, so its fields 2-4 are empty.)

Set HYBRIDCACHE_COMPILED to a compiled build's folder to hash that build. The trace is
$HYBRIDCACHE_SHARED/traces/mooncake/conversation_trace.jsonl (default ../shared).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HYBRIDCACHE_SHARED", REPO.parent / "shared"))
TRACE = SHARED / "traces" / "mooncake" / "conversation_trace.jsonl"


def _short_hash(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def all_cases() -> list[str]:
    from sim.engines.registry import policy_names

    sound = [name for name in policy_names() if not name.startswith("broken-")]
    return [
        f"{name}:{mode}{bounds}"
        for mode in ("replay", "timed")
        for name in sound
        for bounds in ("", ":bounds")
    ]


def hash_line(trace, case: str) -> str:
    from benchmarks.cases import parse_case
    from sim.run.simulate import SimConfig, simulate

    policy, mode, bounds = parse_case(case)
    started_at = time.process_time()
    result = simulate(trace, SimConfig(policy=policy, mode=mode, bounds=bounds))
    cpu_s = time.process_time() - started_at
    summary = json.dumps(result.summary, sort_keys=True, default=str)
    return (
        f"{case:32} req={_short_hash(result.requests.to_csv())} steps={_short_hash(result.steps.to_csv())} "
        f"sum={_short_hash(summary)} cpu={cpu_s:.2f}"
    )


def main(argv: list[str]) -> None:
    if not argv or not argv[0].isdigit() or int(argv[0]) < 1:
        raise SystemExit(__doc__)
    # the checkout first: ``sim/__init__`` takes the build named by HYBRIDCACHE_COMPILED and refuses it if it
    # was built from other sources (the build's own copy first would only be checked against itself)
    sys.path.insert(0, str(REPO))
    from benchmarks.cases import parse_case
    from sim.trace.azure_import import import_mooncake

    cases = argv[1:] or all_cases()
    for case in cases:
        parse_case(case)
    trace = import_mooncake(str(TRACE), limit=int(argv[0]), chains=True)
    for case in cases:
        print(hash_line(trace, case), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
