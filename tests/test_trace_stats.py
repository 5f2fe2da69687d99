"""trace_stats: ideal reuse worked out by hand and against a brute force; sharing structure."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.tokens import TokenSeq
from sim.trace import Request, Segment, Trace
from sim.trace.stats import RunTrie, ideal_cached_tokens, trace_stats


def _ref(ref: str, length: int) -> Segment:
    return Segment(ref=ref, len=length)


def _open(request_id: str, prompt: list[Segment], output_len: int = 5, arrival: float = 0.0) -> Request:
    return Request(id=request_id, arrival=arrival, prompt=prompt, output_len=output_len)


def _closed(request_id: str, after: str, prompt: list[Segment], output_len: int = 5) -> Request:
    return Request(id=request_id, after=after, prompt=prompt, output_len=output_len)


def test_hand_worked_reuse():
    trace = Trace([
        _open("r1", [_ref("X", 10)], output_len=5),  # nothing before it: 0
        _open("r2", [_ref("X", 10), _ref("Y", 3)], arrival=1.0),  # r1's prompt: 10
        _open("r3", [_ref("X", 4), _ref("Z", 2)], arrival=2.0),  # X up to 4, then Z differs: 4
        _open("r4", [_ref("X", 10)], arrival=3.0),  # all of it known, the last token recomputed: 9
        _closed("r5", "r1", [_ref("X", 10), Segment(output_of="r1", len=3), _ref("W", 1)]),  # 10 + 3
        _closed("r6", "r1", [_ref("X", 10), Segment(output_of="r1", skip=2)]),  # skip diverges at 10
    ])
    assert ideal_cached_tokens(trace) == [0, 10, 4, 9, 13, 10]
    stats = trace_stats(trace)
    assert stats["ideal_cached_tokens"] == 46
    assert stats["prompt_tokens"] == 10 + 13 + 6 + 10 + 14 + 13
    assert stats["ideal_cached_fraction"] == 46 / 66


def test_a_shorter_prompt_reuses_a_longer_earlier_one():
    trace = Trace([_open("a", [_ref("Q", 20)]), _open("b", [_ref("Q", 5)], arrival=1.0)])
    assert ideal_cached_tokens(trace) == [0, 4]


def test_branching_inside_an_edge():
    trace = Trace([
        _open("a", [_ref("A", 10), _ref("B", 5)]),
        _open("b", [_ref("A", 10), _ref("C", 5)]),  # splits a's edge after A
        _open("c", [_ref("A", 10), _ref("B", 3), _ref("D", 1)]),  # splits again inside B
        _open("d", [_ref("A", 10), _ref("B", 3), _ref("D", 2)]),
        _open("e", [_ref("A", 6)]),
    ])
    assert ideal_cached_tokens(trace) == [0, 10, 13, 14, 5]


def test_output_is_reusable_only_after_its_request():
    trace = Trace([
        _open("a", [_ref("S", 8)], output_len=4),
        _closed("b", "a", [_ref("S", 8), Segment(output_of="a"), _ref("U", 2)]),
        _closed("c", "b", [_ref("S", 8), Segment(output_of="a"), _ref("U", 2), Segment(output_of="b")]),
    ])
    # c: b's prompt (14) + b's output (5) are all known, then the prompt ends: 19 - 1 = 18
    assert ideal_cached_tokens(trace) == [0, 12, 18]


def test_sharing_structure():
    trace = Trace([
        _open("g1", [_ref("sys", 8), _ref("q1", 2)]),
        _open("g2", [_ref("sys", 8), _ref("q2", 2)], arrival=1.0),
        _open("g3", [_ref("sys", 4), _ref("q3", 2)], arrival=2.0),  # same first segment: same group
        _open("h1", [_ref("doc", 8)], arrival=3.0),
        _open("h2", [_ref("doc", 8)], arrival=4.0),
        _open("solo", [_ref("own", 3)], arrival=5.0),
        _closed("g1-2", "g1", [_ref("sys", 8), Segment(output_of="g1")]),
        _closed("g1-3", "g1-2", [_ref("sys", 8), _ref("x", 1)]),  # chained by after alone
        _open("h1-2", [_ref("doc", 8), Segment(output_of="h1")], arrival=6.0),  # chained by output_of
    ])
    stats = trace_stats(trace)
    assert (stats["fanout_groups"], stats["fanout_requests"], stats["fanout_largest_group"]) == (2, 8, 5)
    assert (stats["multiturn_chains"], stats["multiturn_requests"]) == (2, 5)
    assert (stats["multiturn_chain_len_max"], stats["multiturn_chain_len_mean"]) == (3, 2.5)
    assert stats["multiturn_chain_len_counts"] == {"2": 1, "3": 1}
    assert (stats["open_loop_requests"], stats["closed_loop_requests"]) == (7, 2)
    assert stats["arrival_span_s"] == 6.0
    assert stats["followup_requests"] == 3  # g1-2, g1-3 (after) and h1-2 (output_of)


def test_stats_keys():
    stats = trace_stats(Trace([_open("a", [_ref("s", 3)])]))
    assert list(stats) == [
        "requests", "open_loop_requests", "closed_loop_requests", "prompt_tokens", "output_tokens",
        "arrival_span_s", "fanout_groups", "fanout_requests", "fanout_largest_group", "followup_requests",
        "multiturn_chains", "multiturn_requests", "multiturn_chain_len_mean", "multiturn_chain_len_max",
        "multiturn_chain_len_counts", "ideal_cached_tokens", "ideal_cached_fraction", "ideal_decode_region_hits"]
    assert (stats["ideal_cached_tokens"], stats["arrival_span_s"], stats["multiturn_chains"]) == (0, 0.0, 0)


_runs = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 4), st.integers(1, 5)), min_size=1,
                 max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(_runs, min_size=1, max_size=8))
def test_trie_agrees_with_brute_force(sequences):
    trie, seen = RunTrie(), []
    for runs in sequences:
        seq = TokenSeq(runs)
        expected = max((seq.common_prefix_len(old) for old in seen), default=0)
        assert trie.insert(seq) == expected
        seen.append(seq)
