"""TokenSeq against the plain list of (source, offset) pairs it stands for."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
