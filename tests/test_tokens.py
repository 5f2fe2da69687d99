"""TokenSeq against the plain list of (source, offset) pairs it stands for."""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim import tokens
from sim.tokens import TokenSeq

runs = st.lists(st.tuples(st.sampled_from(["r:a", "r:b", "o:x"]), st.integers(0, 6), st.integers(0, 7)),
                max_size=6)


def pairs(seq: TokenSeq) -> list[tuple[str, int]]:
    return [(source, offset + i) for source, offset, length in seq.runs for i in range(length)]


@settings(max_examples=300, deadline=None)
@given(runs, st.integers(-2, 45), st.integers(-2, 45))
def test_slice_is_list_slicing(raw, start, end):
    seq = TokenSeq(raw)
    cut = seq.slice(start, end)
    assert pairs(cut) == pairs(seq)[max(start, 0):max(end, 0)]
    assert len(cut) == len(pairs(cut))
    assert cut.runs == TokenSeq(list(cut.runs)).runs  # still normal
    assert pairs(seq.slice(start)) == pairs(seq)[max(start, 0):]


@settings(max_examples=300, deadline=None)
@given(runs, runs, st.integers(0, 40))
def test_common_prefix_len_counts_equal_pairs(raw_a, raw_b, at):
    a, b = TokenSeq(raw_a), TokenSeq(raw_b)
    expected = 0
    for x, y in zip(pairs(a), pairs(b)[at:], strict=False):
        if x != y:
            break
        expected += 1
    assert a.common_prefix_len(b, at) == expected


@settings(max_examples=300, deadline=None)
@given(runs, st.integers(1, 5), st.integers(0, 40))
def test_first_page_is_the_page_slice(raw, page, at):
    seq = TokenSeq(raw)
    assert seq.first_page(page, at) == seq.slice(at, at + page).runs
    assert pairs(TokenSeq(list(seq.first_page(page, at)))) == pairs(seq)[at:at + page]


def _slice_both_ways(seq: TokenSeq, start: int, end: int | None) -> tuple[TokenSeq, TokenSeq]:
    """``seq.slice(start, end)`` by the bounds' cut and by the run-by-run reference (``SLICE_BY_BOUNDS`` off)."""
    assert tokens.SLICE_BY_BOUNDS
    fast = seq.slice(start, end)
    tokens.SLICE_BY_BOUNDS = False
    try:
        reference = seq.slice(start, end)
    finally:
        tokens.SLICE_BY_BOUNDS = True
    return fast, reference


long_runs = st.lists(
    st.tuples(st.sampled_from(["r:a", "r:b", "o:x", "o:y"]), st.integers(0, 600), st.integers(1, 520)),
    min_size=1, max_size=40,
)


@settings(max_examples=500, deadline=None)
@given(long_runs, st.integers(-5, 21000), st.integers(-5, 21000), st.booleans())
@example([("r:a", 0, 512), ("r:b", 0, 512), ("o:x", 3, 100)], 0, 1124, False)  # whole runs
@example([("r:a", 0, 512), ("r:b", 0, 512), ("o:x", 3, 100)], 10, 1100, False)  # both ends cut
@example([("r:a", 0, 512), ("r:b", 0, 512), ("o:x", 3, 100)], 512, 1024, False)  # one whole inner run
@example([("r:a", 0, 512), ("r:b", 0, 512), ("o:x", 3, 100)], 600, 664, False)  # inside one run
@example([("r:a", 0, 512), ("r:b", 0, 512), ("o:x", 3, 100)], 511, 513, False)  # one token of two runs
def test_the_bounds_cut_equals_the_run_by_run_slice(raw, start, end, open_end):
    """The fast slice hands back the reference's runs and length, on sequences of many runs (a request's tokens
    hold dozens of 512-token trace blocks and outputs)."""
    seq = TokenSeq(raw)
    fast, reference = _slice_both_ways(seq, start, None if open_end else end)
    assert fast.runs == reference.runs
    assert fast.length == reference.length == len(pairs(reference))


def test_the_fixed_cases_reach_every_branch_of_the_bounds_cut():
    """The examples above reach the cut itself (neither the whole sequence nor an empty one), inside one run and
    across several with and without their ends cut: the property's floor rests on these, not on generation."""
    seq = TokenSeq([("r:a", 0, 512), ("r:b", 0, 512), ("o:x", 3, 100)])
    assert seq.slice(0, 1124) is seq  # the whole: the cut is not reached
    cases = {(10, 1100): 3, (512, 1024): 1, (600, 664): 1, (511, 513): 2, (0, 1000): 2, (100, 1124): 3}
    for (start, end), num_runs in cases.items():
        fast, reference = _slice_both_ways(seq, start, end)
        assert len(fast.runs) == num_runs and fast.runs == reference.runs
    assert seq.slice(10, 1100).runs == (("r:a", 10, 502), ("r:b", 0, 512), ("o:x", 3, 76))
    assert seq.slice(600, 664).runs == (("r:b", 88, 64),)
