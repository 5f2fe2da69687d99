"""``why_column`` reading only the columns it needs, each made a list once (``why.ROWS_BY_COLUMN``), gives the
reference's texts and totals (``itertuples`` over every column): on generated request tables (refused rows,
a previous turn's kept tokens missing, absent or set, misses with blocked ranges, the column absent) and on
whole runs, with ``with_ideal``'s ids read as one list."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run

import sim.run.why as why
from sim.cache.misses import MatchMiss
from sim.cache.reasons import SWA_FINISH_TRIM, SWA_TRIGGER
from sim.run.simulate import SimConfig, simulate
from sim.run.why import KeptMisses, why_column
from sim.trace.generate import fanout, multiturn

ROW = st.tuples(
    st.integers(0, 3000),  # cached
    st.integers(0, 3000),  # full_depth past cached
    st.integers(1, 6000),  # prompt past full_depth
    st.integers(0, 6000),  # ideal
    st.one_of(st.none(), st.integers(0, 6000)),  # previous turn's kept tokens
    st.booleans(),  # refused
    st.sampled_from(["none", "blocked", "evicted"]),  # the miss
)
# a row of each kind: refused, a kept count, none kept, a miss with blocked ranges, one with the next page evicted
FIXED = [
    (100, 50, 900, 1400, 300, False, "blocked"),
    (0, 0, 10, 5, None, True, "none"),
    (64, 200, 700, 900, None, False, "evicted"),
    (0, 100, 2000, 1500, 50, False, "none"),
]


def _table(rows, with_kept: bool) -> tuple[pd.DataFrame, dict[str, MatchMiss]]:
    records, misses = [], {}
    for index, (cached, deeper, longer, ideal, kept, refused, miss) in enumerate(rows):
        request_id = f"r{index}"
        full_depth = cached + deeper
        records.append(
            {
                "id": request_id,
                "rejected": "no room" if refused else "",
                "cached_tokens": cached,
                "full_depth": full_depth,
                "prompt_tokens": full_depth + longer,
                "ideal_cached_tokens": ideal,
                "previous_inserted_tokens": kept,
            }
        )
        if miss != "none" and full_depth > cached:
            half = (cached + full_depth) // 2
            blocked = ((cached, half, SWA_TRIGGER), (half, full_depth, SWA_FINISH_TRIM))
            misses[request_id] = MatchMiss(blocked, next_page_evicted=miss == "evicted")
    table = pd.DataFrame(records, columns=list(why._WhyRow._fields))
    table = table.assign(previous_inserted_tokens=pd.array(table["previous_inserted_tokens"], dtype="Int64"))
    return (table if with_kept else table.drop(columns="previous_inserted_tokens")), misses


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(ROW, max_size=30), with_kept=st.booleans(), page_size=st.sampled_from([1, 16, 64]))
@example(rows=FIXED, with_kept=True, page_size=64)
@example(rows=FIXED, with_kept=False, page_size=16)
def test_the_columns_read_as_lists_give_the_reference(rows, with_kept, page_size):
    table, misses = _table(rows, with_kept)
    texts = ""
    for watcher in (KeptMisses(misses), None):
        on = why_column(table, watcher, page_size)
        try:
            why.ROWS_BY_COLUMN = False
            off = why_column(table, watcher, page_size)
        finally:
            why.ROWS_BY_COLUMN = True
        assert on == off
        texts = texts or " ".join(on[0])  # the watcher's
    if rows == FIXED and with_kept:  # floors: every kind of range is made
        for reason in ("never_kept", "full_evicted", "not_cached", "swa_trigger", "new"):
            assert reason in texts


TURNS = multiturn(num_sessions=4, num_turns=3, system_len=300, user_len=90, output_len=70, seed=5)
SMALL = dict(
    pool_tokens=1400, mamba_states=6
)  # evictions, blocked ranges, refusals (vLLM's would refuse all)


@pytest.mark.parametrize("policy", ["freetoken-budget", "sglang-retain", "vllm"])
@pytest.mark.parametrize("trace", [TURNS, fanout(num_groups=2, prompts_per_group=6)], ids=["turns", "fanout"])
def test_whole_runs_are_the_same(policy, trace, monkeypatch):
    small = trace is TURNS and policy != "vllm"
    config = SimConfig(policy=policy, mode="replay", bounds=False, **(SMALL if small else {}))
    on = simulate(trace, config)
    monkeypatch.setattr(why, "ROWS_BY_COLUMN", False)
    off = simulate(trace, config)
    assert_same_run(on, off)
    assert (on.requests["why"] != "").any()
