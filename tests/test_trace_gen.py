"""Generators: shapes worked out by hand, determinism, and the write/load round trip."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from sim.tokens import TokenSeq
from sim.trace import load_trace, write_trace
from sim.trace.generate import GENERATORS, fanout, multiturn, s1, s2, s3
from sim.trace.stats import ideal_cached_tokens


def _bytes(trace, tmp_path, name="t.jsonl") -> bytes:
    path = tmp_path / name
    write_trace(trace, path)
    return path.read_bytes()


def test_fanout_shape():
    trace = fanout(num_groups=3, prompts_per_group=4, system_len=100, question_len=10, output_len=5)
    assert len(trace) == 12
    assert all(r.arrival == 0.0 for r in trace)  # infinite rate: all at once
    assert {trace.prompt_len(r.id) for r in trace} == {110}
    assert trace.prompt_seq("g1-p2").runs == (("r:sys-g1", 0, 100), ("r:q-g1-p2", 0, 10))
    # every prompt but the first of each group reuses its group's system prompt
    assert sum(ideal_cached_tokens(trace)) == 3 * 3 * 100


def test_fanout_with_rate_has_poisson_arrivals_from_zero():
    trace = fanout(num_groups=8, prompts_per_group=16, request_rate=4.0, seed=1)
    arrivals = [r.arrival for r in trace]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals)
    mean_gap = arrivals[-1] / (len(arrivals) - 1)
    assert 0.15 < mean_gap < 0.35  # 1/4 s expected over 127 gaps


@pytest.mark.parametrize("make", [
    lambda seed: fanout(num_groups=4, prompts_per_group=4, request_rate=2.0, seed=seed),
    lambda seed: multiturn(num_sessions=6, num_turns=3, request_rate=0.5, seed=seed),
    lambda seed: s1(num_prompts=6, prompt_len_jitter=100, seed=seed),
], ids=["fanout", "multiturn", "s1"])
def test_same_seed_same_bytes_other_seed_other_trace(make, tmp_path):
    assert _bytes(make(5), tmp_path, "a") == _bytes(make(5), tmp_path, "b")
    assert _bytes(make(5), tmp_path, "a") != _bytes(make(6), tmp_path, "b")


def test_fanout_other_seed_changes_arrivals_only():
    one, two = (fanout(num_groups=2, prompts_per_group=3, request_rate=2.0, seed=s) for s in (1, 2))
    assert [r.arrival for r in one] != [r.arrival for r in two]
    assert [r.prompt for r in one] == [r.prompt for r in two]


def test_multiturn_prompt_is_history_plus_output_plus_user():
    trace = multiturn(num_sessions=2, num_turns=3, system_len=50, user_len=7, output_len=20, think_time=2.5)
    assert [r.id for r in trace] == ["s0-t0", "s0-t1", "s0-t2", "s1-t0", "s1-t1", "s1-t2"]
    t2 = trace.request("s1-t2")
    assert (t2.after, t2.think_time, t2.session, t2.arrival) == ("s1-t1", 2.5, "s1", None)
    assert trace.prompt_seq("s1-t2").runs == (
        ("r:sys", 0, 50), ("r:u-s1-t0", 0, 7), ("o:s1-t0", 0, 20), ("r:u-s1-t1", 0, 7), ("o:s1-t1", 0, 20),
        ("r:u-s1-t2", 0, 7))
    # each later turn reuses all of the previous prompt + output; s1-t0 reuses the shared system prompt
    assert ideal_cached_tokens(trace) == [0, 77, 104, 50, 77, 104]


def test_multiturn_drop_reasoning_skips_the_start_of_each_output():
    trace = multiturn(num_sessions=1, num_turns=2, system_len=50, user_len=7, output_len=20, drop_reasoning=12)
    assert trace.prompt_seq("s0-t1").runs == (("r:sys", 0, 50), ("r:u-s0-t0", 0, 7), ("o:s0-t0", 12, 8),
                                              ("r:u-s0-t1", 0, 7))
    # the dropped reasoning breaks the prefix at the output: only the previous prompt is reusable
    assert ideal_cached_tokens(trace) == [0, 57]


def test_multiturn_private_system_prompts():
    trace = multiturn(num_sessions=2, num_turns=1, shared_system=False)
    assert trace.prompt_seq("s1-t0").runs[0][0] == "r:sys-s1"
    assert ideal_cached_tokens(trace) == [0, 0]


def test_s1_second_turn_is_prompt_output_and_one_token():
    trace = s1(num_prompts=3, prompt_len=300, output_len=100)
    assert [r.id for r in trace] == ["p0-t1", "p1-t1", "p2-t1", "p0-t2", "p1-t2", "p2-t2"]
    assert all(trace.request(f"p{i}-t1").arrival == 0.0 for i in range(3))
    second = trace.request("p1-t2")
    assert (second.after, second.output_len) == ("p1-t1", 1)
    assert trace.prompt_seq("p1-t2") == TokenSeq([("r:p1", 0, 300), ("o:p1-t1", 0, 100), ("r:p1-t2", 0, 1)])
    assert ideal_cached_tokens(trace) == [0, 0, 0, 400, 400, 400]


def test_s1_jitter_stays_in_range():
    trace = s1(num_prompts=20, prompt_len=3000, prompt_len_jitter=50, seed=3)
    lengths = [trace.prompt_len(f"p{i}-t1") for i in range(20)]
    assert all(2950 <= n <= 3050 for n in lengths) and len(set(lengths)) > 1


@pytest.mark.parametrize("distance, shared", [(1, 1885), (7, 1879), (1886, 0)])
def test_s2_diverges_at_the_distance_from_the_end(distance, shared):
    trace = s2(distance)
    assert trace.prompt_len("r1") == trace.prompt_len("r2") == 1886
    assert trace.prompt_seq("r1").common_prefix_len(trace.prompt_seq("r2")) == shared
    assert trace.request("r2").after == "r1"
    assert ideal_cached_tokens(trace) == [0, shared]


def test_s3_fanout_shares_the_system_prompt_append_the_conversation():
    fan, append = s3(mode="fanout"), s3(mode="append")
    assert ideal_cached_tokens(fan) == [0, 7700]
    assert append.prompt_len("r2") == 7700 + 80 + 16 + 80
    assert ideal_cached_tokens(append) == [0, 7700 + 80 + 16]


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generate_write_load_write_is_byte_identical(name, tmp_path):
    trace = GENERATORS[name](distance=5) if name == "s2" else GENERATORS[name]()
    first = _bytes(trace, tmp_path, "one")
    assert _bytes(load_trace(tmp_path / "one"), tmp_path, "two") == first


@pytest.mark.parametrize("call, phrase", [
    (lambda: fanout(num_groups=0), "num_groups"),
    (lambda: fanout(request_rate=0.0), "request_rate"),
    (lambda: fanout(request_rate=math.nan), "request_rate"),
    (lambda: multiturn(output_len=10, drop_reasoning=10), "drop_reasoning"),
    (lambda: multiturn(think_time=-1.0), "think_time"),
    (lambda: s1(prompt_len=100, prompt_len_jitter=100), "prompt_len_jitter"),
    (lambda: s2(0), "distance"),
    (lambda: s2(2000), "distance"),
    (lambda: s3(mode="sideways"), "mode"),
])
def test_bad_parameters_are_named(call, phrase):
    with pytest.raises(ValueError, match=phrase):
        call()


@pytest.mark.parametrize("name, make", [
    ("fanout.jsonl", lambda: fanout(num_groups=8, prompts_per_group=16, system_len=2048, question_len=128,
                                    output_len=256, request_rate=8.0, seed=0)),
    ("multiturn.jsonl", lambda: multiturn(num_sessions=64, num_turns=5, system_len=1024, user_len=128,
                                          output_len=256, think_time=2.0, request_rate=2.0, seed=0)),
])
def test_sample_traces_are_what_traces_readme_says(name, make, tmp_path):
    samples = Path(__file__).resolve().parent.parent / "traces"
    assert _bytes(make(), tmp_path) == (samples / name).read_bytes()
