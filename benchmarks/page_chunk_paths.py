"""``marconi-vllm``'s 32-token page chunks three ways in one process, beside the issue's yardstick: where a timed
run's excess over its replay lies (docs/results/presets-speed.md, Round 17).

- ``replay, chunk run``: the preset's replay (a request's page chunks in one loop, ``marconi_vllm_run.py``);
- ``replay, per chunk``: the same replay with ``MarconiVllmRules.chunk_runs`` off, each chunk reserved and
  committed through the calls a timed step makes (``_page_slots``, ``reserve``, ``hand_top_leaf``,
  ``after_prefill_chunk``, ``commit_page``), one request at a time and without the loop;
- ``timed``: the preset's timed run (the default loop: each prefilling request takes one page chunk a step);
- ``sglang-retain replay``: the yardstick of issue 24's ratios.

Every output is the preset's own (the switch is a proven reference path). The cases alternate, ``--repeat``
rounds, CPU seconds of ``simulate`` (bounds off); the last lines give each round's ratios. Pure Python only (the
switch is a class attribute of the rules, which a compiled build does not let a script set).

    python benchmarks/page_chunk_paths.py [--trace T] [--limit 1000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.cache.engines.marconi_vllm import MarconiVllmRules  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

# (label, policy, mode, the chunk run on)
CASES = (
    ("replay, chunk run", "marconi-vllm", "replay", True),
    ("replay, per chunk", "marconi-vllm", "replay", False),
    ("timed", "marconi-vllm", "timed", True),
    ("sglang-retain replay", "sglang-retain", "replay", True),
)


def cpu_seconds(trace, policy: str, mode: str, chunk_runs: bool) -> float:
    """The CPU seconds of one ``simulate`` with ``MarconiVllmRules.chunk_runs`` as given (restored after)."""
    saved = MarconiVllmRules.chunk_runs
    MarconiVllmRules.chunk_runs = chunk_runs
    try:
        started_at = time.process_time()
        simulate(trace, SimConfig(policy=policy, mode=mode, bounds=False))
        return time.process_time() - started_at
    finally:
        MarconiVllmRules.chunk_runs = saved


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(mooncake_trace("conversation")))
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    trace = import_mooncake(str(existing_trace(args.trace)), limit=args.limit, chains=True)
    rounds: list[dict[str, float]] = []
    for _ in range(args.repeat):
        seconds = {label: cpu_seconds(trace, policy, mode, runs) for label, policy, mode, runs in CASES}
        print("  ".join(f"{label} {value:.2f}" for label, value in seconds.items()), flush=True)
        rounds.append(seconds)
    for seconds in rounds:
        run, per_chunk, timed, yardstick = (seconds[case[0]] for case in CASES)
        print(
            f"timed / replay {timed / run:.2f}  per chunk / chunk run {per_chunk / run:.2f}  "
            f"timed / per chunk {timed / per_chunk:.2f}  timed / sglang-retain replay {timed / yardstick:.1f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
