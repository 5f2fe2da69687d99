"""Where a compiled replay's time goes: ``perf`` samples of one run, charged to compiled functions.

cProfile cannot see into the compiled core (mypyc's C functions make no Python frames), so this samples the
process with ``perf record --call-graph dwarf`` and charges each sample inside the replay to its innermost
compiled function (``CPyDef_*``: with the C runtime it calls, such as list copies and dict lookups) and,
inclusively, to every compiled function on its stack (docs/results/presets-speed.md, Round 16).

    HYBRIDCACHE_COMPILED=<build> python benchmarks/compiled_profile.py 12031 freetoken-budget [--top 40] [--mode timed]

Needs ``perf`` (and ``perf_event_paranoid`` <= 2); the trace is the Mooncake conversation trace, as in
``scripts/output_hashes.py``. ``--run`` is the child the samples are taken of (one run, bounds off). ``--mode
timed`` samples a timed run instead, charging every sample with a compiled function on its stack (the SimPy loop
between them is interpreted); the own seconds of a timed run's table less its replay's are its excess.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HYBRIDCACHE_SHARED", REPO.parent / "shared"))
TRACE = SHARED / "traces" / "mooncake" / "conversation_trace.jsonl"  # scripts/output_hashes.py's
# the samples charged: a replay's inside its loop (outside it is the import of the trace); a timed run's where any
# compiled function is on the stack (its loop is a SimPy process: the interpreter runs it between compiled calls)
ROOTS = {"replay": "CPyDef_replay___replay_into", "timed": "CPyDef_"}
HZ = 499


def run_once(num_requests: int, policy: str, mode: str) -> None:
    sys.path.insert(0, str(REPO))  # ``sim/__init__`` takes (and checks) the build HYBRIDCACHE_COMPILED names
    from sim.run.simulate import SimConfig, simulate
    from sim.trace.azure_import import import_mooncake

    trace = import_mooncake(str(TRACE), limit=num_requests, chains=True)
    simulate(trace, SimConfig(policy=policy, mode=mode, bounds=False))


def stacks(data: Path) -> list[list[str]]:
    """Each sample's symbols, root first."""
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,sym"], capture_output=True, text=True, check=True
    ).stdout
    out: list[list[str]] = []
    for block in script.split("\n\n"):
        lines = [line.split(None, 1) for line in block.split("\n") if line.strip()]
        frames = [parts[-1].split("+")[0].replace(" (inlined)", "").strip() for parts in lines]
        if frames:
            out.append(frames[::-1])
    return out


def table(samples: list[list[str]], top: int, mode: str) -> list[str]:
    root = ROOTS[mode]
    inside = [s for s in samples if any(frame.startswith(root) for frame in s)]
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for sample in inside:
        compiled = [frame for frame in sample if frame.startswith("CPyDef_")]
        own[compiled[-1]] += 1
        inclusive.update(set(compiled))
    lines = [
        f"{len(inside)} samples in the {mode} run of {len(samples)} ({HZ} Hz); % own / % inclusive / own s"
    ]
    for name, count in own.most_common(top):
        shares = (
            f"{100 * count / len(inside):5.1f} {100 * inclusive[name] / len(inside):5.1f} {count / HZ:6.3f}"
        )
        lines.append(f"{shares}  {name}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("num_requests", type=int)
    parser.add_argument("policy")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--mode", choices=sorted(ROOTS), default="replay")
    parser.add_argument("--run", action="store_true", help="the sampled child: run the replay once")
    args = parser.parse_args()
    if args.run:
        run_once(args.num_requests, args.policy, args.mode)
        return
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "perf.data"
        child = [sys.executable, __file__, str(args.num_requests), args.policy, "--mode", args.mode, "--run"]
        record = ["perf", "record", "-q", "-F", str(HZ), "--call-graph", "dwarf,32768", "-o", str(data)]
        subprocess.run(record + child, check=True)
        print("\n".join(table(stacks(data), args.top, args.mode)))


if __name__ == "__main__":
    main()
