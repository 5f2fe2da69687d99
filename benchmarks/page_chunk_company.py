"""What shares a step with each prefill chunk of a timed run of the default loop (``marconi-vllm`` by default):
why the replay's chunk run (``sim/cache/engines/marconi_vllm_run.py``) cannot take a timed run's chunks.

The run takes a request's page chunks one after another, each reservation next to its commit. A timed step
reserves every chunk of the step (``DefaultScheduler.schedule``) before it commits any (``postprocess``), and
vLLM+'s ``two_pass`` gives a request one page a step, so a request's chunks meet the run's order only where it
prefills alone, step after step. Each chunk is counted as alone (no other item in its step), beside decodes only,
or beside another request's chunk; and the stretches of consecutive steps where one request prefills alone, by
length. ``DefaultScheduler.schedule`` is wrapped for the one run (pure Python only); the counts are exact.

    python benchmarks/page_chunk_company.py --limit 1000
    python benchmarks/page_chunk_company.py --limit 100 --policy no-cache
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.sched import default as default_module  # noqa: E402
from sim.sched.batch import Batch  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

KINDS = ("alone", "beside decodes only", "beside another chunk")


class Company:
    """The counts of one run: chunks by kind, and the lengths of the alone stretches (one request, step after
    step)."""

    def __init__(self) -> None:
        self.chunks: Counter[str] = Counter()
        self.stretches: list[int] = []
        self._alone: tuple[str, int] | None = None  # the request prefilling alone, the step it did so last
        self._length = 0

    def count(self, batch: Batch) -> None:
        chunks = [item.plan.request_id for item in batch.items if item.is_prefill]
        others = len(batch.items) - len(chunks)
        kind = KINDS[2] if len(chunks) > 1 else KINDS[1] if others else KINDS[0]
        self.chunks[kind] += len(chunks)
        if len(chunks) == 1 and not others:
            self._extend(chunks[0], batch.iteration)
        else:
            self.close()

    def _extend(self, request_id: str, iteration: int) -> None:
        if self._alone != (request_id, iteration - 1):
            self.close()
        self._alone, self._length = (request_id, iteration), self._length + 1

    def close(self) -> None:
        if self._length:
            self.stretches.append(self._length)
        self._alone, self._length = None, 0


def counted_run(trace, policy: str) -> Company:
    """One timed run (bounds off) with ``DefaultScheduler.schedule`` wrapped to count each step's batch."""
    company, schedule = Company(), default_module.DefaultScheduler.schedule

    def counting(scheduler: default_module.DefaultScheduler, iteration: int) -> Batch:
        batch = schedule(scheduler, iteration)
        company.count(batch)
        return batch

    default_module.DefaultScheduler.schedule = counting  # type: ignore[method-assign,assignment]
    try:
        simulate(trace, SimConfig(policy=policy, mode="timed", bounds=False))
    finally:
        default_module.DefaultScheduler.schedule = schedule  # type: ignore[method-assign]
    company.close()
    return company


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(mooncake_trace("conversation")))
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--policy", default="marconi-vllm")
    args = parser.parse_args(argv)
    trace = import_mooncake(str(existing_trace(args.trace)), limit=args.limit, chains=True)
    company = counted_run(trace, args.policy)
    total = sum(company.chunks.values()) or 1
    print(f"{args.policy} timed, {args.limit} requests: {total} prefill chunks")
    for kind in KINDS:
        print(f"  {kind:22} {company.chunks[kind]:9} {company.chunks[kind] / total:7.1%}")
    lengths = sorted(company.stretches)
    print(f"alone stretches: {len(lengths)}, chunks {sum(lengths)}, longest {lengths[-1] if lengths else 0}")
    print(
        f"  of 2 or more steps: {sum(1 for n in lengths if n > 1)}, chunks {sum(n for n in lengths if n > 1)}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
