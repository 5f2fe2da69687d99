"""FreeToken's admission match, finish trim and insert walk up the parent links (``freetoken_links``) equal the
reference on the walks' lists (``freetoken_swa.MATCH_UP_LINKS`` / ``TRIM_UP_LINKS``, ``freetoken_insert.CLIMB_TO_LIVE``
off): ``trim_climb`` against the doomed list and ``deepest_acceptable`` on generated paths (pinned examples: a match
after a failed run, one by the root's open run, none, a window of 0), and whole generated FreeToken runs
(``test_freetoken_leaf_heap.cases``) switched on and off: every trim's tombstones, every admission match (its node,
depth and the clock), every insert's SWA pass (the nodes it revives or keeps, the frees counted) and the tables;
and the admission match's window boundary on a fan-out at page 1, which the generated runs never meet.
"""

from __future__ import annotations

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run, same_both_ways
from test_freetoken_leaf_heap import cases

import sim.cache.engines.freetoken_insert as insert
import sim.cache.engines.freetoken_swa as swa
import sim.cache.tree_runs as tree_runs
from sim.cache.engines.freetoken_links import trim_climb
from sim.cache.matching import deepest_acceptable, deepest_acceptable_above
from sim.cache.node import Node
from sim.run.simulate import SimConfig, simulate
from sim.tokens import TokenSeq
from sim.trace.generate import fanout, multiturn

# before any patch (a test patches twice)
TOMBSTONE_DOOMED, MATCH, RECONCILE = swa.tombstone_doomed, swa.SwaRules.match, insert._reconcile_from_frontier
WALK_FROM_LIVE = insert.walk_from_live
# a node: (tokens, live SWA, a state, held by a window, has a side child)
NODE = st.tuples(st.integers(1, 5), st.booleans(), st.booleans(), st.booleans(), st.booleans())


def chain(specs) -> list[Node]:
    """A path below a root, top first, from ``NODE`` tuples."""
    root = Node(TokenSeq(), 0, None, [], [])  # type: ignore[arg-type]
    path, parent, start = [], root, 0
    for num, live, state, held, side in specs:
        node = Node(
            seq(("x", num)), start, parent, [0] * num, [0] * num if live else None, 1 if state else None
        )
        node.swa_holders = {"r"} if held else set()
        parent.children[(start,)] = node
        if side:
            node.children[(-1,)] = Node(seq(("y", 1)), node.end, node, [0], None)
        path.append(node)
        parent, start = node, node.end
    return path


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(NODE, min_size=1, max_size=30), window=st.integers(0, 12), has_mamba=st.booleans())
@example(specs=[(3, True, True, False, False)] * 2 + [(1, False, False, False, False), (4, True, True, False, True), (1, True, True, False, False)], window=6, has_mamba=True)  # fmt: skip
@example(specs=[(2, True, False, False, True), (2, True, True, True, True), (1, True, False, False, False)], window=9, has_mamba=True)  # fmt: skip
@example(specs=[(2, False, True, False, True), (2, True, False, False, True)], window=3, has_mamba=True)
@example(specs=[(1, True, True, False, True)], window=0, has_mamba=False)
@example(specs=[(2, True, True, False, True), (2, True, False, False, False)], window=9, has_mamba=True)
def test_trim_climb_equals_the_list_steps(specs, window, has_mamba):
    path = chain(specs)
    doomed = [n for n in path if n.swa_pages is not None and not n.swa_holders and n.children]
    best = deepest_acceptable(path, window, True, has_mamba)
    assert trim_climb(path[-1], window, has_mamba) == (doomed, best)
    assert (
        deepest_acceptable_above(path[-1], window, True, has_mamba) is best
    )  # the match's climb (lean or not)


def test_the_pinned_examples_meet_each_outcome():
    """The examples' floors: a match inside the path after a failed run, a match by the root's open run, none."""
    top = [(3, True, True, False, False)] * 2 + [(1, False, False, False, False)]
    one = chain(top + [(4, True, True, False, True), (1, True, True, False, False)])
    assert trim_climb(one[-1], 6, True) == ([one[0], one[1], one[3]], one[1])  # the leaf has no child
    two = chain([(2, True, False, False, True), (2, True, True, True, True), (1, True, False, False, False)])
    assert trim_climb(two[-1], 9, True) == ([two[0]], two[1])  # the root reached: the open candidate
    three = chain([(2, False, True, False, True), (2, True, False, False, True)])
    assert trim_climb(three[-1], 3, True) == ([three[1]], None)


def run_logged(trace, config, on: bool, monkeypatch) -> tuple[list, object]:
    """The run with the three switches ``on``: every trim's doomed spans, every match's node, depth and clock,
    every insert's SWA pass (the path's nodes it changes: their spans, SWA pages and stamps, after it)."""
    log: list = []
    tombstone_doomed, match = TOMBSTONE_DOOMED, MATCH

    def logged_reconcile(tree, frontier, path, base, swa_pages, clock, frees):
        num_swa = frees.num_swa
        RECONCILE(tree, frontier, path, base, swa_pages, clock, frees)
        changed = [(n.start, n.end, n.swa_pages, n.full_stamp) for n in path if n.end > frontier]
        if changed or frees.num_swa != num_swa:  # the reference's calls on a path wholly freed do nothing
            log.append(("insert", changed, frees.num_full, frees.num_swa, clock.events))

    def logged_doomed(tree, nodes, frees):
        log.append(("trim", [(n.start, n.end) for n in nodes]))
        tombstone_doomed(tree, nodes, frees)

    def logged_match(self, tree, tokens, prompt_len):
        result = match(self, tree, tokens, prompt_len)
        log.append(("match", result.cached_len, result.full_depth, self.clock.events))
        return result

    monkeypatch.setattr(swa, "MATCH_UP_LINKS", on)
    monkeypatch.setattr(swa, "TRIM_UP_LINKS", on)
    monkeypatch.setattr(insert, "CLIMB_TO_LIVE", on)
    monkeypatch.setattr(insert, "_reconcile_from_frontier", logged_reconcile)
    monkeypatch.setattr(swa, "tombstone_doomed", logged_doomed)
    monkeypatch.setattr(swa.SwaRules, "match", logged_match)
    return log, simulate(trace, config)


@pytest.mark.interpreted  # patches module flags and SwaRules.match, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_links_equal_the_list_steps_over_runs(case, monkeypatch):
    """On the per-node tree, where both logs name the same nodes; then with run nodes on, where the list steps
    make none (their trim reads a run as one node), so only the tables can be compared."""
    trace, config = case
    monkeypatch.setattr(tree_runs, "RUN_NODES", False)
    same_both_ways(lambda up_links: run_logged(trace, config, up_links, monkeypatch))
    monkeypatch.setattr(tree_runs, "RUN_NODES", True)
    with_runs = [run_logged(trace, config, up_links, monkeypatch)[1] for up_links in (True, False)]
    assert_same_run(*with_runs)


@pytest.mark.interpreted
def test_a_fixed_run_trims_and_matches_deep(monkeypatch):
    """A test of the run test: trims of many nodes and matches that hit (a run that trims nothing and matches
    nothing would pass anything), held to the reference; on the per-node tree (run nodes trim a run at once)."""
    monkeypatch.setattr(tree_runs, "RUN_NODES", False)
    trace = multiturn(
        num_sessions=4,
        num_turns=6,
        system_len=300,
        user_len=100,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
        seed=1,
    )
    config = SimConfig(
        policy="freetoken",  # -budget's gap of 256 leaves these prompts short trims
        model="inkling",
        knobs=dict(page_size=1, window=32),
        pool_tokens=4_000,
        mamba_states=16,
        bounds=False,
    )
    walks: list[int] = []

    def counted_walk(tree, req, end, swa_pages, frees):
        walked = WALK_FROM_LIVE(tree, req, end, swa_pages, frees)
        walks.append(len(walked[0]))
        return walked

    monkeypatch.setattr(insert, "walk_from_live", counted_walk)
    log, _ = run_logged(trace, config, True, monkeypatch)
    assert len(walks) > 20 and max(walks) > 8  # the inserts took the listing from the live nodes
    assert max(len(entry[1]) for entry in log if entry[0] == "trim") > 8
    assert sum(entry[1] > 0 for entry in log if entry[0] == "match") > 3
    assert max(len(entry[1]) for entry in log if entry[0] == "insert") > 8
    assert log == run_logged(trace, config, False, monkeypatch)[0]


@pytest.mark.parametrize("window", [16, 32])
@pytest.mark.parametrize("question_len, cached", [(swa.RETAIN_GAP, 200), (swa.RETAIN_GAP + 1, 0)])
def test_a_match_needs_a_whole_window_of_live_tokens(window, question_len, cached):
    """The boundary the generated runs never meet (their spans and windows are page multiples): the fan-out's first
    request trims its path at ``prompt end - window - RETAIN_GAP``, so the shared 200-token head keeps a live tail
    of ``window + RETAIN_GAP - question_len`` tokens; the next prompts reuse the head only where that tail is a
    whole window (a question of ``RETAIN_GAP`` tokens: exactly ``window``), and none of it one token short. An
    admission match asking ``window - 1`` (or ``window + 1``) fails here."""
    trace = fanout(
        num_groups=1, prompts_per_group=4, system_len=200, question_len=question_len, output_len=20,
        request_rate=6.0, seed=1,
    )  # fmt: skip
    knobs = dict(page_size=1, window=window)
    config = SimConfig(
        policy="freetoken",
        model="gemma-4-26b-a4b",
        knobs=knobs,
        pool_tokens=3_000,
        bounds=False,
        mode="replay",
    )  # replay: each prompt after the last one's finish trim
    requests = simulate(trace, config).requests
    assert list(requests.cached_tokens) == [0, cached, cached, cached]
