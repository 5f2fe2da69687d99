"""The why watcher's blocked ranges up the parent links (``misses_links.blocked_by_links``) against the plain
ones along a list of the path (``blocked_on_path``, on the deepest node's ``path_from_root``), at every match of generated
runs: FreeToken's (``test_freetoken_page_lists.page_cases``: SWA, SWA + GDN and GDN models, the three presets,
pages 1 to 64, small pools; replay and timed) and Marconi's and SGLang+'s (``test_marconi_anonymous_ids``:
states on the path, evicted states). Both are asked in the same run, so every answer is compared, not only
the tables. Fixed cases (the ``@example``s) hold floors, counted in the test's own run: matches blocked past a
state (a tombstone's cause read), and ranges split by an evicted state (a run that never reached those would
pass a rule that ignores them); and a whole run with the switch on equals the run with it off.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from same_runs import assert_same_run
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases
from test_why import two_turns

import sim.cache.misses as misses
from sim.cache.components import Component
from sim.cache.events import EventBus, FinishStarted, emit
from sim.cache.misses_links import blocked_by_links, blocked_on_path
from sim.cache.misses_run import tell_evicted
from sim.cache.pools import Pool
from sim.cache.reasons import SWA_FINISH_TRIM
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import s1, s3

WATCHER_INIT = misses.TreeMissTracker.__post_init__


def run_compared(trace, config, monkeypatch) -> Counter:
    """The run, each match's ranges asked both ways and compared; what the matches reached, counted."""
    seen: Counter = Counter()

    def both(last, cached, full_depth, has_swa, has_mamba, tomb_cause, state_evicted):
        path = last.path_from_root()
        plain = blocked_on_path(path, cached, full_depth, has_swa, has_mamba, tomb_cause, state_evicted)
        linked = blocked_by_links(last, cached, full_depth, has_swa, has_mamba, tomb_cause, state_evicted)
        assert linked == plain, (cached, full_depth, [(n.start, n.end) for n in path])
        past = [node for node in path if node.end > cached]
        seen["blocked"] += bool(plain)
        seen["cause_read"] += bool(past) and (not has_mamba or any(n.state is not None for n in past))
        seen["evicted_state"] += any(node in state_evicted for node in past)
        seen["tombstone_cause"] += has_swa and any(node.swa_pages is None for node in path)
        return linked

    watchers: list = []

    def kept(watcher):
        WATCHER_INIT(watcher)
        watchers.append(watcher)

    monkeypatch.setattr(misses, "BLOCKED_BY_LINKS", True)
    monkeypatch.setattr(misses, "blocked_by_links", both)
    monkeypatch.setattr(misses.TreeMissTracker, "__post_init__", kept)
    simulate(trace, config)
    for watcher in watchers:  # keyed by the nodes themselves: a deleted node's entries go with it
        for table in (watcher.tomb_cause, watcher.state_evicted, watcher._prefix_links):
            assert all(node.alive for node in table)
            seen["entries"] += len(table)
    return seen


def fixed_cases(tmp_path) -> list:
    """(trace, config, floors): matches whose ranges read a tombstone's cause past a state, split by an
    evicted state, or pass tombstones (``cause_read``, ``evicted_state``, ``tombstone_cause`` at least)."""

    def write_lines(lines):
        path = tmp_path / "trace.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        return path

    s1_knobs = {"page_size": 128, "track_interval": 256, "chunked_prefill_size": 16384}
    few_states = {"pool_tokens": 4_000_000, "mamba_states": 12, "knobs": {"max_running_requests": 1}}
    return [  # test_why's: the trigger's tombstone past a state; the finish trim's; twenty evicted states
        (s1(num_prompts=4), SimConfig(policy="sglang", knobs=s1_knobs, pool_tokens=4_000_000), (4, 0, 4)),
        (s3(), SimConfig(policy="freetoken", model="gemma-4-26b-a4b"), (1, 0, 1)),
        (two_turns(write_lines), SimConfig(policy="sglang-retain", mode="replay", **few_states), (0, 20, 20)),
        # freetoken-budget at page 16: nothing past a state, its matches blocked all the same
        (*FIXED_CASES[1][:2], (0, 0, 0)),
    ]


@pytest.mark.interpreted
@pytest.mark.parametrize("index", range(4))
def test_the_fixed_runs_reach_each_branch_and_the_switch_leaves_them_alone(index, tmp_path, monkeypatch):
    trace, config, floors = fixed_cases(tmp_path)[index]
    seen = run_compared(trace, config, monkeypatch)
    assert seen["blocked"] >= 1
    assert seen["cause_read"] >= floors[0] and seen["evicted_state"] >= floors[1]
    assert seen["tombstone_cause"] >= floors[2]
    monkeypatch.setattr(misses, "BLOCKED_BY_LINKS", False)
    reference = simulate(trace, config)
    monkeypatch.undo()  # the switch on, unwatched
    assert_same_run(simulate(trace, config), reference)


def assert_both_ways_equal(trace, config, monkeypatch) -> Counter:
    try:
        return run_compared(trace, config, monkeypatch)
    except ValueError:  # a configuration the engine refuses (e.g. the scan chunk and the page)
        reject()
        raise


@pytest.mark.interpreted  # patches module names, which the compiled core binds
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
@example(case=FIXED_CASES[1][:2], mode="replay")
@example(case=FIXED_CASES[3][:2], mode="replay")
def test_freetokens_ranges_up_the_links_are_the_plain_ones(case, mode, monkeypatch):
    trace, config = case
    assert_both_ways_equal(trace, replace(config, mode=mode), monkeypatch)


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[0][:2])
@example(case=MARCONI_CASES[2][:2])
def test_marconis_ranges_up_the_links_are_the_plain_ones(case, monkeypatch):
    trace, config = case
    assert_both_ways_equal(trace, config, monkeypatch)


@pytest.mark.interpreted  # the watcher is made without a model (``resolved`` is read only by ``classify``)
def test_a_split_tombstone_leaves_its_cause_on_both_halves_and_a_deleted_leaf_none():
    """The node-keyed ``tomb_cause``: a split's new upper half is another key, and takes the lower's cause."""
    events = EventBus()
    pools = Pool("full", 64), Pool("swa", 64, Component.SWA), Pool("mamba", 0, Component.MAMBA)
    tree = RadixTree(4, *pools, events=events)
    watcher = misses.TreeMissTracker(tree, None, events)  # type: ignore[arg-type]
    node = tree.add_leaf(tree.root, seq(("a", 16)), pools[0].alloc(4), pools[1].alloc(4))
    emit(events.channel(FinishStarted), FinishStarted("r0"))
    tree.tombstone(node)
    upper = tree.split(node, 8)
    assert watcher.tomb_cause == {node: SWA_FINISH_TRIM, upper: SWA_FINISH_TRIM}
    tree.delete_leaf(node)
    assert watcher.tomb_cause == {upper: SWA_FINISH_TRIM}
    other = tree.add_leaf(tree.root, seq(("b", 8)), pools[0].alloc(2), pools[1].alloc(2))
    tree.tombstone(other)
    tell_evicted(watcher, [other])  # vLLM+'s chunk run tells its evicted leaves at once (``misses_run``)
    assert watcher.tomb_cause == {upper: SWA_FINISH_TRIM}
