"""vLLM's block keys with one digest a run (``sim/cache/blocks/keys.py``, ``ONE_DIGEST``: a run's digest takes
the key of the previous run's end) against the reference (off: the runs before a run digested apart): the
values differ, the equality does not. Over generated pairs of token runs, two blocks' keys are equal with the
switch on exactly when they are with it off (and exactly when the prefixes are), in both key forms, chains
extended step by step or made at once; and whole ``vllm`` runs with the switch on and off are the same run."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_vllm_by_id_property import RUNS

from sim.cache.blocks import keys as block_keys
from sim.cache.blocks.keys import BlockKeys
from sim.run.simulate import SimConfig, simulate
from sim.tokens import TokenSeq
from sim.trace.generate import fanout, multiturn

runs = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(0, 30), st.integers(1, 50)), min_size=1, max_size=6
)


def all_keys(
    sequences: list[list], size: int, steps: list[int], switches: tuple[bool, bool], monkeypatch
) -> list:
    """Every sequence's keys, oldest first, its chain extended at ``steps`` then to its end; ``switches``:
    (``ONE_DIGEST``, ``INT_KEYS``)."""
    monkeypatch.setattr(block_keys, "ONE_DIGEST", switches[0])
    monkeypatch.setattr(block_keys, "INT_KEYS", switches[1])
    keys, found = BlockKeys(size), []
    for parts in sequences:
        tokens = TokenSeq([("r:" + source, start, length) for source, start, length in parts])
        grown = keys.chain(tokens, 0)
        for stop in sorted(steps):
            keys.chain(tokens, stop, grown)
        found.append(keys.chain(tokens, 10**6, grown).keys)
    return found


def equalities(keys_of: list[list]) -> list[tuple[int, int, int, int]]:
    """Which pairs of blocks (sequence, index) have equal keys."""
    flat = [(seq, index, key) for seq, keys in enumerate(keys_of) for index, key in enumerate(keys)]
    return [(a[0], a[1], b[0], b[1]) for a in flat for b in flat if a[2] == b[2]]


@settings(max_examples=200, deadline=None)
@example(
    seqs=[[("a", 0, 40), ("b", 5, 70)], [("a", 0, 40), ("b", 5, 30), ("a", 0, 30)]], size=16, steps=[1, 3]
)
@example(
    seqs=[[("a", 0, 3), ("b", 0, 2), ("a", 9, 40)], [("a", 0, 3), ("b", 0, 1), ("a", 9, 40)]],
    size=3,
    steps=[2],
)
@given(
    seqs=st.lists(runs, min_size=1, max_size=3),
    size=st.sampled_from((1, 3, 16)),
    steps=st.lists(st.integers(0, 12), max_size=4),
)
def test_keys_are_equal_with_one_digest_a_run_exactly_where_they_are_in_the_reference(seqs, size, steps):
    with pytest.MonkeyPatch.context() as monkeypatch:
        found = {
            switches: all_keys(seqs, size, steps, switches, monkeypatch)
            for switches in ((True, True), (True, False), (False, True), (False, False))
        }
    reference = equalities(found[False, True])
    assert all(equalities(keys) == reference for keys in found.values())
    assert [len(keys) for keys in found[True, True]] == [len(keys) for keys in found[False, True]]
    prefixes = [TokenSeq([("r:" + s, o, n) for s, o, n in parts]) for parts in seqs]
    same_prefix = [
        (a, i, b, j)
        for a, i, b, j in reference
        if prefixes[a].slice(0, (i + 1) * size) == prefixes[b].slice(0, (j + 1) * size)
    ]
    assert same_prefix == reference  # equal keys: equal prefixes (and each block equals itself)


def test_the_fixed_examples_reach_shared_and_parted_keys_across_runs(monkeypatch):
    """The floor on the fixed examples: blocks ending in a later run, some shared between the sequences and
    some parted by an earlier run's length."""
    seqs = [[("a", 0, 40), ("b", 5, 70)], [("a", 0, 40), ("b", 5, 30), ("a", 0, 30)]]
    one, other = all_keys(seqs, 16, [1, 3], (True, True), monkeypatch)
    assert one[:4] == other[:4] and one[4] != other[4]  # block 4 (64..80) holds other's third run
    short = [[("a", 0, 3), ("b", 0, 2), ("a", 9, 40)], [("a", 0, 3), ("b", 0, 1), ("a", 9, 40)]]
    one, other = all_keys(short, 3, [2], (True, True), monkeypatch)
    assert one[0] == other[0] and all(x != y for x, y in zip(one[1:], other[1:], strict=False))


WHOLE_RUNS = (
    *RUNS,
    (multiturn(3, 4, 200, 48, 60), SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=6000)),
    (fanout(2, 10, 200, 40, 60), SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=1500)),
)


@pytest.mark.parametrize("case", range(len(WHOLE_RUNS)))
def test_whole_runs_are_the_same_with_one_digest_a_run_and_two(case, monkeypatch):
    trace, config = WHOLE_RUNS[case]

    def run(one_digest: bool) -> tuple:
        monkeypatch.setattr(block_keys, "ONE_DIGEST", one_digest)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    assert on[1].summary.requests == len(trace.requests) and on[1].summary.cached_tokens > 0
