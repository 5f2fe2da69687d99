"""A replay whose bounds are asked hands the bounds' trie the request sequences it made (``replay.SEQS_KEPT``), where
the trie made each again (the reference). As a property over generated replays (multi-turn and fan-out traces,
closed-loop turns replayed out of the trace's order, pages 1 to 64, pools from ample to so tight that requests are
refused before or part-way through their run): the trie (its parents, depths and every event's nodes), the
sequences it was handed, the tables and the summary equal the run with the switch off. Fixed cases hold floors on
the sequences handed and on the requests refused part-way (admitted, so their events are the trie's too)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

import sim.bounds.summary as summary_module
import sim.run.replay as replay_module
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from sim.trace.generate import fanout, multiturn

POLICIES = ["no-cache", "radix", "sglang-retain", "vllm", "freetoken", "marconi-sglang"]
MODELS = ["tiny", "tiny-swa", "qwen3-next"]
TRIE = summary_module.SegmentTrie  # the original, before any run of this test wraps it


def run_logged(trace: Trace, config: SimConfig, kept: bool, monkeypatch) -> tuple:
    """The run with ``SEQS_KEPT`` ``kept``: the trie it built (parents, depths, each event's nodes) and, by request,
    the sequences the trie was handed (equal to the trace's); the result; the ids of those handed."""
    monkeypatch.setattr(replay_module, "SEQS_KEPT", kept)
    logs: list = []

    def trie(trace, page_size, events, seqs=None):
        built = TRIE(trace, page_size, events, seqs)
        handed = {request_id: seq.runs for request_id, seq in (seqs or {}).items()}
        made = {request_id: trace.request_seq(request_id).runs for request_id in handed}
        logs.append((built.parent, built.depth, [built.pages(event) for event in events], handed == made))
        handed_ids.update(handed)
        return built

    handed_ids: set[str] = set()
    monkeypatch.setattr(summary_module, "SegmentTrie", trie)
    result = simulate(trace, config)
    return logs, result, handed_ids


def assert_equal_runs(trace: Trace, config: SimConfig, monkeypatch) -> tuple[int, int]:
    """Both ways equal; how many sequences the trie was handed, and how many of them were refused part-way."""
    (_, result, handed), (_, _, handed_off) = same_both_ways(
        lambda kept: run_logged(trace, config, kept, monkeypatch)
    )
    assert not handed_off  # the reference hands none
    refused = set(result.requests["id"][result.requests["rejected"] != ""])
    return len(handed), len(refused & handed)


@st.composite
def replay_cases(draw):
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(page_size=page, chunked_prefill_size=page * draw(st.integers(2, 8)))
    seed = draw(st.integers(0, 50))
    if draw(st.booleans()):
        trace = multiturn(
            num_sessions=draw(st.integers(2, 5)), num_turns=draw(st.integers(2, 4)), system_len=300,
            user_len=100, output_len=150, seed=seed,
        )  # fmt: skip
    else:
        trace = fanout(
            num_groups=draw(st.integers(1, 3)), prompts_per_group=draw(st.integers(2, 5)), system_len=300,
            question_len=50, output_len=draw(st.integers(10, 150)), seed=seed,
        )  # fmt: skip
    config = SimConfig(
        policy=draw(st.sampled_from(POLICIES)), model=draw(st.sampled_from(MODELS)), knobs=knobs,
        pool_tokens=draw(st.integers(400, 6_000)), mamba_states=draw(st.integers(2, 30)), bounds=True,
        mode="replay",
    )  # fmt: skip
    return trace, config


def _config(policy: str, page: int, pool_tokens: int, model: str = "tiny-swa", states: int = 20) -> SimConfig:
    knobs = dict(page_size=page, chunked_prefill_size=page * 4 if page > 1 else 64)
    return SimConfig(
        policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=states, bounds=True,
        mode="replay",
    )  # fmt: skip


TURNS = multiturn(num_sessions=5, num_turns=4, system_len=300, user_len=90, output_len=70, seed=3)
# (trace, config, floors: sequences handed to the trie, requests refused part-way)
FIXED_CASES = [
    (TURNS, _config("no-cache", 16, 6_000), (20, 0)),
    (TURNS, _config("radix", 1, 4_000), (20, 0)),
    (fanout(num_groups=3, prompts_per_group=9), _config("vllm", 16, 4_000, "tiny"), (27, 0)),
    (TURNS, _config("marconi-sglang", 16, 900, "qwen3-next", 4), (15, 9)),
]


@pytest.mark.interpreted  # patches a module flag the compiled core binds
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=replay_cases())
@example(case=FIXED_CASES[0][:2])
@example(case=FIXED_CASES[3][:2])
def test_the_kept_seqs_make_the_reference_trie(case, monkeypatch):
    trace, config = case
    assert_equal_runs(trace, config, monkeypatch)  # a configuration a preset refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("trace, config, floors", FIXED_CASES)
def test_the_fixed_replays_hand_their_seqs(trace, config, floors, monkeypatch):
    handed, refused_part_way = assert_equal_runs(trace, config, monkeypatch)
    assert handed >= floors[0]
    assert refused_part_way >= floors[1]
