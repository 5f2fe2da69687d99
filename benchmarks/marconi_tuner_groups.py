"""Whether Marconi's alpha tuner could share replays between alphas that agree: each alpha's victims in the
tuner's replay (``AlphaTuner.replay_all``, one Marconi replay of the Mooncake conversation trace's first
``--limit`` requests), how many distinct victim sequences (groups of alphas) there are after each eviction,
and how many request runs a tuner that ran each group once per request (a request where a group splits run
again by each part) would take against the 21 per request it takes now.

    python benchmarks/marconi_tuner_groups.py [--trace T] [--limit 1000] [--policy marconi] [--pool-tokens N]

The evictions are watched by wrapping ``MarconiEvictor.evict`` and the tuner's ``replay_all`` and ``run``
(pure Python only); a victim is named by its path's spans, the same in every alpha's copy of the tree.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.cache.engines import marconi_evict, marconi_tuner  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

Victim = tuple[int, tuple, bool]  # (request index in the window, the victim's path, whether a state alone)


class Watch:
    """Each alpha's victims in the tuner's replays, and the window the tuner replayed."""

    def __init__(self) -> None:
        self.tuning = False
        self.request = -1
        self.victims: dict[float, list[Victim]] = defaultdict(list)
        self.window = 0
        self.tuner_cpu_s = 0.0

    def install(self) -> None:
        evict, replay_all, run = (
            marconi_evict.MarconiEvictor.evict,
            marconi_tuner.AlphaTuner.replay_all,
            marconi_tuner.AlphaTuner.run,
        )
        watch = self

        def watched_evict(evictor, tree, victim, stale):
            if watch.tuning:
                path = tuple((n.start, n.end, n.edge) for n in victim.path_from_root())
                watch.victims[evictor.alpha].append((watch.request, path, bool(victim.children)))
            return evict(evictor, tree, victim, stale)

        def watched_replay_all(tuner, manager, cost):
            indices = {request_id: i for i, (request_id, _, _) in enumerate(tuner.history)}
            watch.tuning, watch.window, started = True, len(tuner.history), time.process_time()
            tuner.run = lambda fresh, request_id, *rest: watch.run(
                run, tuner, indices, fresh, request_id, *rest
            )
            figures = replay_all(tuner, manager, cost)
            watch.tuning, watch.tuner_cpu_s = False, time.process_time() - started
            del tuner.run
            return figures

        marconi_evict.MarconiEvictor.evict = watched_evict  # type: ignore[method-assign]
        marconi_tuner.AlphaTuner.replay_all = watched_replay_all  # type: ignore[method-assign]

    def run(self, run, tuner, indices, fresh, request_id, *rest):
        self.request = indices[request_id]
        return run(tuner, fresh, request_id, *rest)

    def groups_before(self, request: int) -> int:
        """Distinct victim sequences over the requests before ``request``."""
        seen = {
            tuple((path, state) for at, path, state in victims if at < request)
            for victims in self.victims.values()
        }
        return len(seen)


def report(watch: Watch) -> None:
    alphas = sorted(watch.victims)
    if not alphas:
        print("the tuner's replays evicted nothing (no tuning, or a window that fits)")
        return
    first = min(victims[0][0] for victims in watch.victims.values() if victims)
    print(
        f"window {watch.window} requests, tuner {watch.tuner_cpu_s:.2f} s CPU, first eviction at request {first}"
    )
    print("evictions per alpha:", {alpha: len(watch.victims[alpha]) for alpha in alphas})
    num_alphas, grouped, previous = len(marconi_tuner.ALPHAS), 0, 1
    for request in range(first, watch.window):
        after = watch.groups_before(request + 1)
        grouped += previous + (after if after != previous else 0)
        if after != previous:
            print(f"  request {request}: {previous} -> {after} groups")
        previous = after
    per_alpha = num_alphas * (watch.window - first)
    print(
        f"request runs from the first eviction on: {per_alpha} per alpha, {grouped} grouped ({grouped / per_alpha:.2f})"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(mooncake_trace("conversation")))
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--policy", default="marconi")
    parser.add_argument("--pool-tokens", type=int, help="tokens per pool (default: the preset's sizing)")
    args = parser.parse_args(argv)
    trace = import_mooncake(str(existing_trace(args.trace)), limit=args.limit, chains=True)
    watch = Watch()
    watch.install()
    started = time.process_time()
    simulate(trace, SimConfig(policy=args.policy, mode="replay", pool_tokens=args.pool_tokens))
    print(f"{args.policy} replay of {args.limit} requests: {time.process_time() - started:.2f} s CPU")
    report(watch)


if __name__ == "__main__":
    main(sys.argv[1:])
