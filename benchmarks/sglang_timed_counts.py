"""Where an SGLang-loop timed run's steps go, counted: its full steps by kind, its batch runs, their quiet
stretches (and the empty ones) and event steps (and the requests whose step is an event).

    python benchmarks/sglang_timed_counts.py radix marconi-sglang [--limit 1000]

The first ``--limit`` requests of the conversation trace (or ``--trace``), bounds off. Counts only: the calls are wrapped
(module attributes patched for the run), so the run's CPU is not read here (``docs/results/presets-speed.md``,
Round 20). A full step's kind: prefill or decode-only, whether the step before launched a prefill, whether
requests still wait; a decode-only step also says why the loop did not take it in a run (``_why_full``).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.cache.components import Component  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.sched import sglang, sglang_fast, sglang_runs  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402


def _why_full(sched) -> str:
    """Why ``plain_decode_run`` left the next step to the loop (its early returns, then the pools' room)."""
    launched = sched._launched
    if sched._last_extend or (launched is not None and any(item.is_prefill for item in launched.items)):
        return "after a prefill"
    runs = [s for s in sched.running if s not in sched._done]
    reqs = [sched.manager.requests[state.request_id] for state in runs]
    if runs and sched.manager.pools[Component.FULL].num_free < len(runs):
        return "FULL pool short"
    if runs and sched.manager.batch_run_room(reqs) < 0:
        return "no room for a run"
    return "other (a run cut short before it)"


def _count_full_steps(counts: Counter) -> None:
    schedule = sglang.SGLangScheduler.schedule

    def counted(self, iteration):
        before = self._launched is not None and any(item.is_prefill for item in self._launched.items)
        why = "" if self.waiting else _why_full(self)
        batch = schedule(self, iteration)
        num_prefill = sum(item.is_prefill for item in batch.items)
        kind = "empty" if not batch.items else "prefill" if num_prefill else f"decode-only: {why}"
        counts[f"full step, {kind}" + (", after a prefill" if before and num_prefill else "")] += 1
        return batch

    sglang.SGLangScheduler.schedule = counted  # type: ignore[method-assign]


def _count_runs(counts: Counter) -> None:
    take_run, take_stretch, event_step = (
        sglang_runs.take_batch_run,
        sglang_runs.take_quiet_stretch,
        sglang_runs._event_step,
    )

    def run(sched, iteration, max_steps, *args, **kwargs):
        done, full_steps = take_run(sched, iteration, max_steps, *args, **kwargs)
        counts["batch runs"] += 1
        counts["batch run steps"] += done
        counts["batch run requests"] += len(sched.running)
        return done, full_steps

    def stretch(*args):
        taken, full_steps = take_stretch(*args)
        counts["quiet stretches asked"] += 1
        counts["quiet stretches empty"] += not taken
        return taken, full_steps

    def event(sched, reqs, iteration, in_flight, announced, process, needs=None):
        counts["event steps"] += 1
        counts["event steps processing finishes"] += process is not None
        counts["event step requests with an event"] += sum(needs.events) if needs is not None else 0
        return event_step(sched, reqs, iteration, in_flight, announced, process, needs)

    sglang_runs.take_batch_run, sglang_runs.take_quiet_stretch, sglang_runs._event_step = run, stretch, event
    sglang_fast.take_batch_run = run  # (imported by name there; a finishing run calls the patched one)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "policies", nargs="+", help="SGLang-loop presets (radix, sglang, marconi-sglang, ...)"
    )
    parser.add_argument("--trace", default=str(mooncake_trace("conversation")))
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args(argv)
    trace = import_mooncake(str(existing_trace(args.trace)), limit=args.limit, chains=True)
    counts: Counter = Counter()
    _count_full_steps(counts)
    _count_runs(counts)
    for policy in args.policies:
        counts.clear()
        result = simulate(trace, SimConfig(policy=policy, mode="timed", bounds=False))
        # The table's rows are the full steps plus the batch runs' steps: a reader can check the counts add up.
        counts["steps in the table"] = len(result.steps)
        print(policy)
        for name, count in sorted(counts.items()):
            print(f"  {count:7d}  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
