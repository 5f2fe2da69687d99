"""Block keys (sim/cache/blocks/keys.py): equal exactly when the prefixes up to the block's end are equal."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks.keys import BlockKeys, _block_runs
from sim.tokens import TokenSeq


def seq(*parts: tuple[str, int, int]) -> TokenSeq:
    return TokenSeq([("r:" + source, start, length) for source, start, length in parts])


def test_equal_prefixes_share_keys_and_a_difference_changes_every_later_block():
    keys = BlockKeys(16)
    a = keys.chain(seq(("x", 0, 100)), 6)
    b = keys.chain(seq(("x", 0, 40), ("y", 0, 60)), 6)
    assert len(a) == 6 and a[:2] == b[:2]  # tokens 0..31 agree
    assert all(x != y for x, y in zip(a[2:], b[2:], strict=True))  # block 2 holds the first differing token


def test_keys_depend_on_tokens_not_on_how_the_runs_were_cut():
    keys = BlockKeys(16)
    whole = seq(("x", 0, 64))
    pieces = seq(("x", 0, 10)) + seq(("x", 10, 30)) + seq(("x", 40, 24))
    assert keys.chain(whole, 4) == keys.chain(pieces, 4)


def test_a_block_after_a_different_prefix_differs_even_with_equal_tokens():
    keys = BlockKeys(16)
    a = keys.chain(seq(("p", 0, 16), ("x", 0, 16)), 2)
    b = keys.chain(seq(("q", 0, 16), ("x", 0, 16)), 2)
    assert a[1] != b[1]  # the chain: a block's key stands for the whole prefix


def test_only_whole_blocks_and_extension_in_place():
    keys = BlockKeys(16)
    tokens = seq(("x", 0, 50))
    known = keys.chain(tokens, 1)
    assert keys.chain(tokens, 99, known) is known and len(known) == 3


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 40), st.integers(1, 40)), min_size=1, max_size=8),
       st.sampled_from((1, 3, 16)), st.integers(0, 3))
def test_block_runs_are_the_slices_runs(parts, size, first_block):
    tokens = seq(*parts)
    stop = len(tokens) // size * size
    start = min(first_block * size, stop)
    expected = [tokens.slice(p, p + size).runs for p in range(start, stop, size)]
    assert list(_block_runs(tokens, start, stop, size)) == expected
