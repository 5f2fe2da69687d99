"""Where a timed run of the default loop (``sim/sched/default.py``: ``no-cache``, ``marconi-vllm``) spends its CPU:
the full steps by kind, the batch runs' event steps by what they do, and CPU seconds by phase.

The loop's methods are wrapped for the one run (pure Python only: the compiled core's classes cannot be wrapped),
each wrapper adding ``time.process_time`` around the call, so the phases carry a few percent of that overhead;
the counts are deterministic. Full steps by kind: with a prompt chunk, decodes only (split by whether some request
is within two tokens of its last output: the step a batch run leaves to the loop), or empty (nothing could be
scheduled: the loop parks the newest running request). Event steps (``loop_runs._event_step``): the batch size
and which of its requests free SWA, take a checkpoint or start a page.

    python benchmarks/default_loop_split.py --limit 1000                  # no-cache, timed, bounds off
    python benchmarks/default_loop_split.py --limit 100 --policy marconi-vllm
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.run import engine as engine_module  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.sched import default as default_module  # noqa: E402
from sim.sched import loop_runs  # noqa: E402
from sim.sched.batch import Batch  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

# (owner, attribute, label): the phases timed, each call's CPU seconds added to its label
PHASES = (
    (default_module.DefaultScheduler, "postprocess", "full step: postprocess"),
    (engine_module.Engine, "_record_step", "full step: row"),
    (default_module.DefaultScheduler, "plain_decode_run", "run question"),
    (default_module.DefaultScheduler, "advance_plain", "batch run: all"),
    (loop_runs, "take_quiet_stretch", "batch run: quiet stretches"),
    (loop_runs, "event_step_fits", "batch run: event room checks"),
    (engine_module.Engine, "_record_batch_run", "batch run: rows"),
)


class LoopSplit:
    """The counts and CPU seconds of one run."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.full_steps: Counter[str] = Counter()
        self.event_steps: Counter[tuple[int, int, int, int]] = Counter()

    def timed(self, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            started_at = time.process_time()
            result = call(*args)
            self.seconds[label] += time.process_time() - started_at
            self.calls[label] += 1
            return result

        return wrapper

    def schedule(self, call: Callable[..., Batch]) -> Callable[..., Batch]:
        """``schedule``, its CPU seconds and count by the kind of batch it formed."""

        def wrapper(sched: Any, iteration: int) -> Batch:
            owing = {run.request_id: run.output_len - run.decoded for run in sched.running.values()}
            started_at = time.process_time()
            batch = call(sched, iteration)
            kind = _batch_kind(batch, owing)
            self.seconds[f"full step: schedule, {kind}"] += time.process_time() - started_at
            self.full_steps[kind] += 1
            return batch

        return wrapper

    def event_step(self, call: Callable[..., Batch | None]) -> Callable[..., Batch | None]:
        """``_event_step``, its CPU seconds and what its requests do: (batch size, SWA frees, checkpoints, pages)."""

        def wrapper(manager: Any, reqs: list[Any], iteration: int, *rest: Any) -> Batch | None:
            rules, phase = manager.rules, iteration + manager.policy.iteration_phase
            frees = sum(1 for req in reqs if _frees_swa(rules, req, phase))
            checkpoints = sum(1 for req in reqs if rules.decode_checkpoint(req) is not None)
            pages = sum(1 for req in reqs if req.pages_needed(req.kv_len + 1))
            self.event_steps[(len(reqs), frees, checkpoints, pages)] += 1
            started_at = time.process_time()
            batch = call(manager, reqs, iteration, *rest)
            self.seconds["batch run: event steps"] += time.process_time() - started_at
            return batch

        return wrapper


def _batch_kind(batch: Batch, owing: dict[str, int]) -> str:
    if not batch.items:
        return "empty"
    if any(item.is_prefill for item in batch.items):
        return "with a chunk"
    if any(owing.get(item.plan.request_id, 0) <= 2 for item in batch.items):
        return "decodes, a last output near"
    return "decodes, other"


def _frees_swa(rules: Any, req: Any, phase: int) -> bool:
    target = rules.decode_free_target(req, phase)
    return target is not None and target > req.swa_frontier


def run_split(trace: Any, policy: str) -> tuple[float, LoopSplit]:
    """One timed run (bounds off) with the phases wrapped; the originals are put back after it."""
    split = LoopSplit()
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in PHASES]
    originals += [
        (default_module.DefaultScheduler, "schedule", default_module.DefaultScheduler.schedule),
        (loop_runs, "_event_step", loop_runs._event_step),
    ]
    for owner, name, label in PHASES:
        setattr(owner, name, split.timed(label, getattr(owner, name)))
    default_module.DefaultScheduler.schedule = split.schedule(default_module.DefaultScheduler.schedule)  # type: ignore[method-assign]
    loop_runs._event_step = split.event_step(loop_runs._event_step)
    try:
        started_at = time.process_time()
        simulate(trace, SimConfig(policy=policy, mode="timed", bounds=False))
        return time.process_time() - started_at, split
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--policy", default="no-cache")
    args = parser.parse_args()
    trace = import_mooncake(
        str(existing_trace(mooncake_trace("conversation"))), limit=args.limit, chains=True
    )
    cpu_s, split = run_split(trace, args.policy)
    print(f"{args.policy} timed, {args.limit} requests: {cpu_s:.2f} CPU s (wrapped)")
    print("full steps by kind:", dict(split.full_steps.most_common()))
    for label, seconds in sorted(split.seconds.items()):
        print(f"  {label:40} {seconds:7.3f} s  {seconds / cpu_s:6.1%}")
    print("event steps (requests, SWA frees, checkpoints, pages started): count")
    for shape, count in split.event_steps.most_common(12):
        print(f"  {shape}: {count}")
    print(f"  ... {sum(split.event_steps.values())} in all")


if __name__ == "__main__":
    main()
