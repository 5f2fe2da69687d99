"""A follow-up's key chain seeded from the shelf (``sim/cache/blocks/shared_chains.py``, switch ``SHARED_CHAINS``)
against the reference (off: every admission's chain computed from the root).

Generated conversations of token runs (each sequence the runs of an earlier one, cut anywhere, a run's length
changed or its offset moved, then runs of its own), chains asked to any number of keys then extended step by
step: every chain the shelf hands out holds the reference's keys and stands where the reference's walk stands
(its run, that run's start, digest and key base), before and after each extension. Whole ``vllm`` runs with
the switch on and off are the same run (tables, summary, the pool's map at the end) on the private-blocks
property's generated traces and configs, on conversations whose turns quote the last turn, and on the head of
the real conversation trace; floors: the seeded path is taken and seeds keys.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_vllm_private_blocks_property import (
    PREEMPTED,
    PRIVATE_EVICTED,
    SHARED_EVICTED,
    SKIPPED,
    build,
    config_of,
    on_fixed_and_generated,
)
from vllm_bare_view import dressed_entries

import sim.run.simulate as simulate_module
from benchmarks.real_traces import existing_trace, mooncake_trace
from sim.cache.blocks import keys as block_keys
from sim.cache.blocks import shared_chains
from sim.cache.blocks.keys import BlockKeys, KeyChain
from sim.run.simulate import SimConfig, simulate
from sim.tokens import TokenSeq
from sim.trace.azure_import import import_mooncake
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace

run_parts = st.tuples(st.sampled_from("abcd"), st.integers(0, 30), st.integers(1, 60))
# (which earlier sequence, how many of its runs, a change to the last kept run, new runs)
follow_up = st.tuples(
    st.integers(0, 9),
    st.integers(0, 8),
    st.sampled_from(("same", "longer", "shorter", "moved")),
    st.lists(run_parts, max_size=3),
)


def sequences_of(first: list, follow_ups: list) -> list[list[tuple[str, int, int]]]:
    """The runs of each sequence: the first, then each follow-up from an earlier one."""
    made = [[("r:" + s, o, n) for s, o, n in first]]
    for which, num_runs, change, new in follow_ups:
        kept = list(made[which % len(made)][:num_runs])
        if kept and change != "same":
            source, start, length = kept[-1]
            if change == "longer":
                kept[-1] = (source, start, length + 7)
            elif change == "shorter" and length > 1:
                kept[-1] = (source, start, length - 1)
            elif change == "moved":
                kept[-1] = (source, start + 1, length)
        made.append(kept + [("r:" + s, o, n) for s, o, n in new])
    return made


def where(chain: KeyChain) -> tuple:
    """What a chain holds and where its walk stands (``before`` is read only for a run whose digest is not
    known: a seeded chain leaves it at the root until its walk crosses a run)."""
    return list(chain.keys), chain.run, chain.run_start, chain.digest, chain.at


def chains_both_ways(seqs: list, size: int, asks: list[int], steps: list[int]) -> None:
    """Every sequence's chain from the shelf and from the root, asked to ``asks[i]`` keys then extended at
    ``steps``, held equal at each point; then, every sequence made, each earlier chain held to its reference
    again and extended to its end (a donor still running goes on with its own chain after a follow-up seeded
    from it)."""
    shelf, reference = shared_chains.ChainShelf(BlockKeys(size)), BlockKeys(size)
    made = []
    for index, runs in enumerate(seqs):
        tokens, ask = TokenSeq(runs), asks[index % len(asks)]
        ours, theirs = shelf.chain(tokens, ask, None), reference.chain(tokens, ask)
        assert where(ours) == where(theirs)
        for stop in sorted(steps):
            assert where(shelf.chain(tokens, ask + stop, ours)) == where(
                reference.chain(tokens, ask + stop, theirs)
            )
        made.append((tokens, ours, theirs))
    for tokens, ours, theirs in made:
        assert where(ours) == where(theirs)
        assert where(shelf.chain(tokens, 10**6, ours)) == where(reference.chain(tokens, 10**6, theirs))


@settings(max_examples=300, deadline=None)
@example(
    first=[("a", 0, 40), ("b", 5, 70)],
    follow_ups=[(0, 2, "same", [("c", 0, 30)]), (1, 3, "shorter", [("d", 2, 9)])],
    size=16,
    asks=[100],
    steps=[],
)
@example(
    first=[("a", 0, 3), ("b", 0, 2), ("a", 9, 40)],
    follow_ups=[(0, 3, "longer", [])],
    size=3,
    asks=[2, 20],
    steps=[1, 5],
)
@given(
    first=st.lists(run_parts, min_size=1, max_size=6),
    follow_ups=st.lists(follow_up, max_size=6),
    size=st.sampled_from((1, 3, 16)),
    asks=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    steps=st.lists(st.integers(0, 12), max_size=3),
)
def test_a_seeded_chain_holds_the_reference_keys_and_stands_where_its_walk_stands(
    first, follow_ups, size, asks, steps
):
    chains_both_ways(sequences_of(first, follow_ups), size, asks, steps)


def test_the_fixed_examples_seed_keys_across_runs_and_stop_at_a_changed_run(monkeypatch):
    seqs = sequences_of(
        [("a", 0, 40), ("b", 5, 70)], [(0, 2, "same", [("c", 0, 30)]), (1, 3, "shorter", [("d", 2, 9)])]
    )
    seeds = counting_seeds(monkeypatch)
    chains_both_ways(seqs, 16, [100], [])
    assert seeds == [6, 8]  # 110 tokens: 6 blocks; then 139 of 140: 8 blocks
    assert shared_chains.shared_len(tuple(seqs[1]), tuple(seqs[0])) == 110
    assert shared_chains.shared_len(tuple(seqs[2]), tuple(seqs[1])) == 139
    moved = sequences_of([("a", 0, 40), ("b", 5, 70)], [(0, 2, "moved", [])])
    assert shared_chains.shared_len(tuple(moved[1]), tuple(moved[0])) == 40


@pytest.mark.parametrize("one_digest,int_keys", [(False, True), (True, False), (False, False)])
def test_the_reference_key_shapes_and_digests_are_not_seeded(one_digest, int_keys, monkeypatch):
    """A seeded chain stands in ``_extend``'s walk only: under the reference's digests or keys the shelf hands
    out chains from the root, and they are the reference's."""
    monkeypatch.setattr(block_keys, "ONE_DIGEST", one_digest)
    monkeypatch.setattr(block_keys, "INT_KEYS", int_keys)
    seeds = counting_seeds(monkeypatch)
    seqs = sequences_of([("a", 0, 40), ("b", 5, 70)], [(0, 2, "same", [("c", 0, 30)]), (1, 3, "same", [])])
    chains_both_ways(seqs, 16, [3, 100], [2, 9])
    assert seeds == []


def counting_seeds(monkeypatch) -> list[int]:
    """The keys each seeded chain holds as ``seeded`` hands it out, in order (its misses left out)."""
    seeds: list[int] = []
    seeded = shared_chains.seeded

    def counted(*args):
        chain = seeded(*args)
        if chain is not None:
            seeds.append(len(chain.keys))
        return chain

    monkeypatch.setattr(shared_chains, "seeded", counted)
    return seeds


def both_ways(build, monkeypatch) -> tuple[object, int]:
    """``build()``'s run (a trace and config) with the switch on and off, held the same run, with the same map,
    entries and free queue at the end (``dressed_entries``); the on run and the keys it seeded."""
    seeds, ends = counting_seeds(monkeypatch), {}
    run_over = simulate_module._run_over

    def run(on: bool) -> tuple:
        monkeypatch.setattr(shared_chains, "SHARED_CHAINS", on)

        def ended(manager, watcher):
            manager.check_integrity()
            ends[on] = (
                manager.pool.blocks_of,
                dressed_entries(manager.pool),
                list(manager.pool._tail.live()),
                list(manager.pool._head),
            )
            return run_over(manager, watcher)

        monkeypatch.setattr(simulate_module, "_run_over", ended)
        trace, config = build()
        return (), simulate(trace, config)

    try:
        on, _ = same_both_ways(run)
    except ValueError:
        pytest.skip("refused")
    assert ends[True] == ends[False]
    return on[1], sum(seeds)


@on_fixed_and_generated(60, PRIVATE_EVICTED, SHARED_EVICTED, PREEMPTED, SKIPPED)
def test_whole_runs_are_the_same_with_chains_seeded_and_from_the_root(trace_spec, config_spec, monkeypatch):
    both_ways(lambda: (build(trace_spec), config_of(config_spec)), monkeypatch)


def conversations(num_talks: int, num_turns: int) -> Trace:
    """Conversations whose turns quote the last turn's prompt and output, then new tokens; every talk opens with
    one of two system prompts."""
    requests: list[Request] = []
    prompts: dict[str, list[Segment]] = {}
    for turn in range(num_turns):
        for talk in range(num_talks):
            rid, last = f"c{talk}t{turn}", f"c{talk}t{turn - 1}"
            opening = [Segment(ref=f"sys{talk % 2}", len=200), Segment(ref=f"u{talk}", len=90)]
            head = prompts[last] + [Segment(output_of=last)] if turn else opening
            prompts[rid] = head + [Segment(ref=f"u{rid}", len=60 + 37 * ((talk + turn) % 5))]
            timing = {"after": last} if turn else {"arrival": 0.01 * talk}
            requests.append(Request(id=rid, prompt=list(prompts[rid]), output_len=40 + 9 * talk, **timing))
    return Trace(requests, path="<conversations>")


@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize(
    "model,pool_tokens", [("inkling", 3000), ("tiny-swa", 2400), ("gemma-4-26b-a4b", 9000)]
)
def test_conversations_are_the_same_run_and_their_follow_ups_seeded(mode, model, pool_tokens, monkeypatch):
    config = SimConfig(policy="vllm", model=model, mode=mode, bounds=False, pool_tokens=pool_tokens)
    result, num_seeded = both_ways(lambda: (conversations(5, 4), config), monkeypatch)
    assert result.summary.cached_tokens > 0
    assert num_seeded >= 80  # 15 follow-ups, each seeded at least its opening (83 to 625 keys by hash block)


def test_the_real_trace_head_is_the_same_run_with_its_follow_ups_seeded(monkeypatch):
    try:
        path = existing_trace(mooncake_trace("conversation"))
    except SystemExit:
        pytest.skip("no conversation trace (HYBRIDCACHE_SHARED)")
    trace = import_mooncake(str(path), limit=400, chains=True)
    config = SimConfig(policy="vllm", mode="replay", bounds=False)
    result, num_seeded = both_ways(lambda: (trace, config), monkeypatch)
    assert result.summary.requests == 400 and num_seeded > 10_000
