"""A step's newly full blocks committed for all its groups in one ``CacheMap.cache_groups``: pure Python's one
pass for all the groups (``cache_map.ONE_COMMIT`` on) leaves the map, the blocks' keys and groups as the
reference, a ``cache_group`` a group (off), and as the compiled core's loops: over maps holding some of the keys
already (a key's newer block listed after its older ones), keys twice in one group's blocks, a block hashed
already (the whole step then a group at a time), one group or several. Whole ``vllm`` runs, replay and timed,
with the switch on and off are the same run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.blocks import by_id, cache_map
from sim.cache.blocks.cache_map import CacheMap
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn

NUM_BLOCKS, NUM_GROUPS = 16, 3
# blocks hashed before the step: (block, key, group), keys of a small alphabet so a step's keys meet them
before = st.lists(
    st.tuples(st.integers(1, NUM_BLOCKS - 1), st.integers(0, 4), st.integers(0, NUM_GROUPS - 1)),
    max_size=6,
    unique_by=lambda bkg: bkg[0],
)
# the step: each group's (block, key) pairs, the groups and the blocks distinct (the blocks of a step's tables)
step = st.lists(
    st.tuples(
        st.integers(0, NUM_GROUPS - 1), st.lists(st.tuples(st.integers(1, NUM_BLOCKS - 1), st.integers(0, 6)))
    ),
    max_size=NUM_GROUPS,
    unique_by=lambda group_pairs: group_pairs[0],
)
# group 1's keys all new, group 2's a key twice, group 0's one its map holds (block 9): the pass and both fallbacks
MIXED = ([(9, 1, 0)], [(0, [(1, 0), (2, 1)]), (1, [(3, 0), (4, 1)]), (2, [(5, 2), (6, 2)])])


def committed(made: list, commits: list, loops: bool, one_commit: bool, monkeypatch) -> tuple:
    """The map and the per-block lists after ``made`` is cached and ``commits`` go in one ``cache_groups``."""
    monkeypatch.setattr(by_id, "LOOPS", loops)
    monkeypatch.setattr(cache_map, "ONE_COMMIT", one_commit)
    cache, seen = CacheMap(NUM_BLOCKS, NUM_GROUPS), set()
    for block, key, group in made:
        cache.cache_in(block, key, group)
    step = []
    for group, pairs in commits:
        pairs = [(block, key) for block, key in pairs if block not in seen and not seen.add(block)]
        if pairs:
            step.append(([block for block, _ in pairs], [key for _, key in pairs], group))
    cache.cache_groups(step)
    maps = [sorted(first.items()) for first in cache.first_in], [dict(more) for more in cache.more_in]
    return maps, cache.key_at, cache.group_at


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(made=MIXED[0], commits=MIXED[1])
@example(made=[(3, 0, 1)], commits=MIXED[1])  # a block hashed already: a group at a time
@given(made=before, commits=step)
def test_one_commit_leaves_the_map_as_the_reference(made, commits, monkeypatch):
    reference = committed(made, commits, False, False, monkeypatch)
    assert committed(made, commits, False, True, monkeypatch) == reference
    assert committed(made, commits, True, True, monkeypatch) == reference


def test_the_mixed_step_lists_new_keys_and_duplicates_in_order(monkeypatch):
    (first_in, more_in), key_at, group_at = committed(*MIXED, False, True, monkeypatch)
    assert first_in[0] == [(0, 1), (1, 9)] and more_in[0] == {1: [2]} and first_in[1] == [(0, 3), (1, 4)]
    assert first_in[2] == [(2, 5)] and more_in[2] == {2: [6]}
    assert key_at[1:7] == [0, 1, 0, 1, 2, 2] and group_at[1:7] == [0, 0, 1, 1, 2, 2]


RUNS = (
    (fanout(2, 12, 200, 40, 60), SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=2000)),
    (multiturn(3, 4, 200, 48, 60), SimConfig(policy="vllm", mode="timed", bounds=False, pool_tokens=4000)),
)


@pytest.mark.parametrize("case", range(len(RUNS)))
def test_whole_runs_are_the_same_with_one_commit(case, monkeypatch):
    trace, config = RUNS[case]
    monkeypatch.setattr(by_id, "LOOPS", False)  # the pure passes, where the switch takes its own path

    def run(on: bool) -> tuple:
        monkeypatch.setattr(cache_map, "ONE_COMMIT", on)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    assert on[1].summary.requests == len(trace.requests) and on[1].summary.cached_tokens > 0
