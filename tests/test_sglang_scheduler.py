"""SGLang's scheduler in the simulator (sim/sched/sglang.py): on the hand-made concurrent scenario of
tests/sglang_concurrent_scenarios.py simulate schedules, step by step, what SGLang 0.5.23 scheduled, retracts what
it retracted, keeps the rest in retract_decode's keep order and ends each request where it ended (pinned;
tests/conformance runs SGLang again)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.compare_steps import simulated_steps
from tests import sglang_concurrent_scenarios as hand


def test_simulate_schedules_what_sglang_scheduled():
    run = simulated_steps(hand.siblings(), "sglang")
    assert [(step.at, step.batch) for step in run.steps[:5]] == hand.FIRST_BATCHES
    assert len(run.steps) == hand.NUM_STEPS
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == hand.RETRACTED
    assert [(step.at, step.batch) for step in run.steps if step.at in (37, 38)] == hand.AFTER_RETRACTION
    assert hand.outcomes(run.requests) == hand.OUTCOMES


def test_a_batch_is_all_prefill_or_all_decode():
    # SGLang's default loop runs no mixed chunk: a step extends or decodes, never both
    for step in simulated_steps(hand.siblings(), "sglang").steps:
        assert len({prefill for _, _, prefill in step.batch}) == 1


def test_the_plain_loop_commits_a_middle_chunk_at_the_next_scheduling():
    # --disable-overlap-schedule: stash_chunked_request commits a middle chunk when the next step is scheduled,
    # so the tree holds nothing after the first chunk; the last chunk is committed as its result is processed
    run = simulated_steps(hand.chunked_plain_loop(), "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps] == hand.PLAIN_LOOP_STEPS
    assert hand.outcomes(run.requests) == hand.PLAIN_LOOP_OUTCOMES


@pytest.mark.parametrize("schedule_policy", ["fcfs", "lpm", "lof", "dfs-weight", "hrrn"])
def test_the_schedule_policy_orders_the_waiting_queue_as_sglang_does(schedule_policy):
    # calc_priority: FCFS keeps arrival order; LPM the longest tree match first and x2 behind x1 (in-batch
    # prefix caching); LOF the longest output first; DFS-weight the tree depth first, the heaviest subtree first;
    # HRRN the most prefill tokens processed while waiting per token to prefill (y, the shortest, first).
    # The first three steps are a's chunks in every policy.
    run = simulated_steps(hand.queued(schedule_policy), "sglang")
    prefills = [(step.at, step.batch) for step in run.steps if step.batch[0][2] and step.at >= 3]
    assert prefills == hand.QUEUED_PREFILLS[schedule_policy]
    assert hand.outcomes(run.requests) == hand.QUEUED_OUTCOMES[schedule_policy]


def test_lof_sorts_on_max_new_tokens_as_clipped_even_to_nothing():
    # a asked for six outputs, but the pool leaves none beside its prompt (max_new_tokens 0): LOF puts it after
    # b's one output, so the pass admits c and b and stops at a (sorted on the six, or on the one token a still
    # samples, a would go before b and stop the pass there)
    run = simulated_steps(hand.clipped_to_nothing(), "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps] == hand.CLIPPED_STEPS
    assert hand.outcomes(run.requests) == hand.CLIPPED_OUTCOMES


def test_a_request_finished_at_its_prefill_frees_its_row_for_the_next_pass():
    # the plain loop releases a in the iteration that ran its prefill; the last batch shrinks when it is
    # merged, so the running cap of 2 no longer holds c back at step 1
    run = simulated_steps(hand.freed_at_prefill(), "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps] == hand.FREED_STEPS
    assert hand.outcomes(run.requests) == hand.FREED_OUTCOMES


def test_an_unmodelled_schedule_policy_is_refused_by_name():
    with pytest.raises(ValueError, match="schedule_policy"):
        simulated_steps(hand.queued("random"), "sglang")


def test_mixed_chunks_carry_the_decode_rows_and_track_no_decode_state():
    # --enable-mixed-chunk: each pass's chunk budget loses a token per running request (63, cut anywhere after
    # the first chunk's page floor); a's decode row rides in b's prefill batches, and its step at the track
    # grid (64) saves no state there, so its follow-up c reuses nothing
    run = simulated_steps(hand.mixed_chunks(), "sglang")
    assert [(step.at, step.batch) for step in run.steps if 10 <= step.at <= 15] == hand.MIXED_STEPS
    assert len(run.steps) == hand.MIXED_NUM_STEPS
    assert hand.outcomes(run.requests) == hand.MIXED_OUTCOMES


def test_without_mixed_chunks_a_decodes_apart_and_its_state_is_reused():
    # the same scenario on SGLang's default loop: b's prefill batches hold no decode row, a's decode step at 64
    # saves its state, and c reuses it
    scenario = hand.mixed_chunks()
    plain = replace(scenario, config=replace(scenario.config, mixed_chunk=False))
    run = simulated_steps(plain, "sglang")
    assert all(len({prefill for _, _, prefill in step.batch}) == 1 for step in run.steps)
    assert run.requests["c"].cached_tokens == 64


def test_lpm_falls_back_to_fcfs_above_128_waiting():
    # _determine_active_policy: over WAITING_QUEUE_PREFIX_MATCH_MAX waiting requests LPM neither matches every
    # request nor sorts; it touches the prefixes every 32nd pass as FCFS does
    from collections import deque

    from sim.cache.results import MatchResult
    from sim.sched.request import RequestState
    from sim.sched.sglang_policy import WaitingOrder
    from sim.tokens import TokenSeq

    matched: list[int] = []

    def match(tokens, known):
        matched.append(known)
        return MatchResult(known, known, None)  # the longer the prompt, the longer the match: LPM would reverse it

    def waiting(count):
        return deque(
            RequestState(f"r{i}", None, 10 + i, 1, None, tokens=TokenSeq.of(f"r{i}", 11 + i)) for i in range(count)
        )

    order = WaitingOrder("lpm", match, lambda state: state.prompt_len)
    queue = waiting(129)
    order.calc_priority(queue)
    assert [s.request_id for s in queue] == [f"r{i}" for i in range(129)]
    assert len(matched) == 128  # the first pass touches the first 128, head last
    queue = waiting(128)
    order.calc_priority(queue)
    assert [s.request_id for s in queue] == [f"r{i}" for i in reversed(range(128))]


def test_dfs_weight_orders_the_heaviest_subtree_first_and_a_node_after_its_children():
    # _dfs_weight_order: a's subtree holds one match, b's two (one at b, one below it), c's one (a tie with a:
    # the children's order keeps a first); the root's own (nothing matched) go last, in queue order
    from sim.cache.pools import Pool
    from sim.cache.tree import RadixTree
    from sim.sched.request import RequestState
    from sim.sched.sglang_policy import _dfs_weight_order
    from tests.cache_helpers import seq

    tree = RadixTree(4, Pool("full", 64), Pool("swa", 0), Pool("mamba", 0))
    a = tree.add_leaf(tree.root, seq(("a", 4)), [0], None)
    b = tree.add_leaf(tree.root, seq(("b", 4)), [1], None)
    c = tree.add_leaf(tree.root, seq(("c", 4)), [2], None)
    below_b = tree.add_leaf(b, seq(("b", 4), ("d", 4)).slice(4), [3], None)

    def states(*names):
        return [RequestState(name, None, 8, 1, None) for name in names]

    at_node = {tree.root: states("r1", "r2"), c: states("c1"), b: states("b1"), a: states("a1"),
               below_b: states("d1")}
    order = [state.request_id for state in _dfs_weight_order(at_node)]
    assert order == ["d1", "b1", "a1", "c1", "r1", "r2"]


def test_hrrns_clock_counts_a_decode_step_as_the_prefill_batch_that_became_the_running_batch():
    # run_batch adds extend_num_tokens; a decode batch is the running batch object, which keeps the field of the
    # prefill batch it was (prepare_for_decode never resets it); merging into a running batch keeps the object
    from sim.cache.results import ChunkPlan
    from sim.sched.batch import Batch, BatchItem
    from sim.sched.sglang_clock import TokenClock

    def batch(*items):
        return Batch(0, [BatchItem(ChunkPlan(rid, start, end, None), prefill) for rid, start, end, prefill in items])

    clock = TokenClock()
    clock.entered("late")
    clock.launched(batch(("a", 0, 10, True), ("b", 0, 6, True)))
    clock.joined_running(True)  # a and b become the running batch: it carries 16
    clock.launched(batch(("a", 10, 11, False), ("b", 6, 7, False)))
    assert clock.processed == 32
    clock.launched(batch(("c", 0, 5, True), ("a", 11, 12, False)))  # mixed: the decode row counts a token
    clock.joined_running(False)  # merged into the running batch: it still carries 16
    clock.launched(batch(("a", 12, 13, False)))
    assert clock.processed == 32 + 6 + 16
    clock.entered("retracted")
    clock.launched(batch(("a", 13, 14, False)))
    assert (clock.waited("late"), clock.waited("retracted")) == (70, 16)
