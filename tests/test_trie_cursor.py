"""The trie's cursor helpers against the sequences themselves: ``CURSOR_DIRECT``'s page keys and moves against
``first_page`` and the run-by-run move, and ``RUNS_AT_ONCE``'s label compare against the tokens compared one by one
(the trie built every way: tests/test_segment_trie.py)."""

from __future__ import annotations

import os
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.bounds import trie_cursor
from sim.tokens import TokenSeq

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    sources=st.lists(st.sampled_from("ab"), min_size=6, max_size=6),
    last_empty=st.booleans(),
    page=st.integers(1, 12),
)
def test_the_cursor_direct_keys_and_moves_are_the_sequences(lengths, sources, last_empty, page):
    """``CURSOR_DIRECT``'s page key at every token (cut from the cursor's runs) is ``first_page``'s there, and its move
    (by the run starts) lands where the run-by-run move does, to the sequence's end and past it; runs of a source
    that continue each other, and an empty last run (a request's own output of no tokens, as ``request_seq`` makes
    it), included."""
    runs = [
        (sources[index], sum(lengths[:index]) * (index % 2), count) for index, count in enumerate(lengths)
    ]
    seq = TokenSeq._trusted(tuple(runs + [("o", 0, 0)] * last_empty), sum(lengths))
    starts = seq._run_starts()
    cursors = [(run, inside) for run, (_, _, count) in enumerate(seq.runs) for inside in range(count)]
    for at, (run, inside) in enumerate(cursors):
        with mock.patch.object(trie_cursor, "CURSOR_DIRECT", True):
            assert trie_cursor.page_key(seq, run, inside, page, at) == seq.first_page(page, at)
        for step in range(len(seq) - at + 3):
            moved = trie_cursor.moved_on(seq.runs, run, inside + step)
            assert trie_cursor.moved_on(seq.runs, run, inside + step, starts) == moved


# runs a label and a request share, or part on: a source's stretches that continue each other or not, of 1-9 tokens,
# and an empty run (a request's output of no tokens)
PIECES = [("a", 0, 5), ("a", 5, 3), ("a", 8, 9), ("b", 0, 4), ("b", 2, 4), ("c", 7, 1), ("c", 0, 0)]


@st.composite
def compares(draw):
    """A label's sequence, a token in it, and ours: often the label's runs from there on (so the compare covers the
    label: the fast path), then one run changed, cut or put in, or runs of their own."""
    label_runs = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8))
    label = TokenSeq._trusted(tuple(label_runs), sum(run[2] for run in label_runs))
    if not label.length:
        label = TokenSeq._trusted((("d", 0, 3),), 3)
    label_at = draw(st.integers(0, label.length - 1))
    sliced = draw(st.booleans())
    ours = list((label.slice(label_at) if sliced else label).runs)
    if draw(st.integers(0, 3)) == 0 or not ours:
        at = draw(st.integers(0, len(ours)))
        ours[at:at] = [draw(st.sampled_from(PIECES))]
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(ours) - 1))
        source, offset, count = ours[at]
        ours[at] = (source, offset, draw(st.integers(0, count + 2)))
    ours += draw(st.lists(st.sampled_from(PIECES), max_size=2))
    seq = TokenSeq._trusted(tuple(ours), sum(run[2] for run in ours))
    if not seq.length:
        seq = TokenSeq._trusted((("d", 0, 3),), 3)
    aligned = 0 if sliced else label_at  # our token there is the label's ``label_at``-th, unless changed
    our_at = min(aligned, seq.length - 1) if draw(st.booleans()) else draw(st.integers(0, seq.length - 1))
    limit = draw(st.integers(1, label.length - label_at))
    return label, label_at, seq, our_at, limit


def tokens(seq: TokenSeq, at: int) -> list[tuple[str, int]]:
    return [(source, offset + index) for source, offset, count in seq.runs for index in range(count)][at:]


def common(label: TokenSeq, label_at: int, seq: TokenSeq, our_at: int) -> int:
    """The tokens the two sequences share from there on, counted one by one."""
    count = 0
    for theirs, ours in zip(tokens(label, label_at), tokens(seq, our_at), strict=False):
        if theirs != ours:
            break
        count += 1
    return count


@settings(max_examples=EXAMPLES * 4, deadline=None)
@given(compare=compares())
def test_a_label_found_covered_at_once_is_covered_token_by_token(compare):
    """``RUNS_AT_ONCE``: ``common_tokens`` up to its limit is the count of equal tokens, as with the switch off; and
    where ``covered`` says the label is covered, every one of its ``limit`` tokens is ours."""
    label, label_at, seq, our_at, limit = compare
    run, inside = trie_cursor.moved_on(seq.runs, 0, our_at)
    truth = min(common(label, label_at, seq, our_at), limit)
    for at_once in (True, False):
        with mock.patch.object(trie_cursor, "RUNS_AT_ONCE", at_once):
            assert (
                min(trie_cursor.common_tokens(label, label_at, seq.runs, run, inside, limit), limit) == truth
            )
    starts = label._run_starts()
    index = next(i for i in range(len(starts) - 1, -1, -1) if starts[i] <= label_at)
    if trie_cursor.covered(label.runs, starts, index, label_at, seq.runs, run, inside, limit):
        assert truth == limit


def test_covered_within_a_run_across_runs_and_not():
    """Fixed cases: a label inside one run; across four runs (the middle two compared as tuples) from mid-run; ours
    longer in the last run; ours parting in a middle run, in the last run, and a first run that ends apart."""
    label = TokenSeq._trusted((("a", 0, 5), ("b", 0, 4), ("c", 3, 2), ("a", 9, 6)), 17)
    starts = label._run_starts()
    ours = (("x", 0, 2), ("a", 2, 3), ("b", 0, 4), ("c", 3, 2), ("a", 9, 10))
    assert trie_cursor.covered(label.runs, starts, 0, 2, ours, 1, 0, 3)  # within the label's first run
    assert trie_cursor.covered(label.runs, starts, 0, 2, ours, 1, 0, 15)  # to the label's end
    assert trie_cursor.covered(label.runs, starts, 0, 2, ours, 1, 0, 10)  # into its last run
    parted = (("a", 2, 3), ("b", 0, 3), ("c", 3, 2), ("a", 9, 6))
    assert not trie_cursor.covered(label.runs, starts, 0, 2, parted, 0, 0, 15)
    short_last = (("a", 2, 3), ("b", 0, 4), ("c", 3, 2), ("a", 9, 5))
    assert not trie_cursor.covered(label.runs, starts, 0, 2, short_last, 0, 0, 15)
    assert trie_cursor.covered(label.runs, starts, 0, 2, short_last, 0, 0, 14)
    apart = (("a", 2, 4), ("b", 0, 4))
    assert not trie_cursor.covered(label.runs, starts, 0, 2, apart, 0, 0, 5)
    assert trie_cursor.common_tokens(label, 2, short_last, 0, 0, 15) == 14
