"""Small traces and brute-force optima for the bound tests."""
from __future__ import annotations

import itertools

from hypothesis import strategies as st

from sim.bounds.events import Lookup
from sim.bounds.page_paths import PagePaths
from sim.bounds.state_bound import Options
from sim.trace import Request, Segment, Trace


@st.composite
def small_traces(draw, max_requests: int = 8):
    """Open-loop requests over a few shared segments, and closed-loop follow-ups that quote an output."""
    requests: list[Request] = []
    arrival = 0.0
    for index in range(draw(st.integers(2, max_requests))):
        prompt = [Segment(ref=f"sys{draw(st.integers(0, 2))}", len=draw(st.sampled_from([8, 16, 24])))]
        if requests and draw(st.booleans()):
            before = draw(st.sampled_from(requests))
            prompt = list(before.prompt) + [Segment(output_of=before.id)]
        for _ in range(draw(st.integers(0, 2))):
            prompt.append(Segment(ref=f"u{draw(st.integers(0, 4))}", len=draw(st.integers(1, 12))))
        quoted = [s.output_of for s in prompt if s.output_of is not None]
        if quoted:
            timing = dict(after=quoted[-1], think_time=draw(st.sampled_from([0.0, 0.01])))
        else:
            arrival += draw(st.sampled_from([0.0, 0.001, 0.01, 0.1]))
            timing = dict(arrival=arrival)
        requests.append(Request(id=f"r{index}", prompt=prompt, output_len=draw(st.integers(1, 12)), **timing))
    return Trace(requests)


def brute_force_full(events: list, paths: PagePaths, capacity: int) -> int:
    """The most page hits any cache of ``capacity`` pages can have: after every computation the cache may
    become any prefix-closed set of the pages it had and the pages just computed (exhaustive search)."""
    states = {frozenset()}
    best: dict[frozenset, int] = {frozenset(): 0}
    for event in events:
        pages = paths.pages(event)
        if isinstance(event, Lookup):
            new_best = {}
            for state, hits in best.items():
                run = next((i for i, p in enumerate(pages) if p not in state), len(pages))
                new_best[state] = hits + (run if event.counted else 0)
            best = new_best
            continue
        new_best = {}
        for state, hits in best.items():
            pool = sorted(state | set(pages))
            for size in range(min(capacity, len(pool)) + 1):
                for chosen in itertools.combinations(pool, size):
                    kept = frozenset(chosen)
                    if all(paths.parent[p] == 0 or paths.parent[p] in kept for p in kept):
                        new_best[kept] = max(new_best.get(kept, -1), hits)
        best = new_best
    del states
    return max(best.values()) * paths.page_size


def brute_force_options(options: Options, capacity: int) -> int:
    """The best choice of at most one option per request with at most ``capacity`` covering any point."""
    groups: dict[int, list[int]] = {}
    for index, owner in enumerate(options.owner.tolist()):
        groups.setdefault(owner, []).append(index)
    best = 0
    for choice in itertools.product(*[[None] + members for members in groups.values()]):
        cover = [0] * options.num_points
        total = 0
        for index in choice:
            if index is None:
                continue
            total += int(options.weight[index])
            for point in range(int(options.first[index]), int(options.last[index]) + 1):
                cover[point] += 1
        if max(cover, default=0) <= capacity:
            best = max(best, total)
    return best
