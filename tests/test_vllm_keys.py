"""Block keys (sim/cache/blocks/keys.py): equal exactly when the prefixes up to the block's end are equal."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks import keys as block_keys
from sim.cache.blocks.keys import ROOT, BlockKeys, _digest, block_key, pack_key
from sim.tokens import TokenSeq


def seq(*parts: tuple[str, int, int]) -> TokenSeq:
    return TokenSeq([("r:" + source, start, length) for source, start, length in parts])


def test_equal_prefixes_share_keys_and_a_difference_changes_every_later_block():
    keys = BlockKeys(16)
    a = keys.chain(seq(("x", 0, 100)), 6).keys
    b = keys.chain(seq(("x", 0, 40), ("y", 0, 60)), 6).keys
    assert len(a) == 6 and a[:2] == b[:2]  # tokens 0..31 agree
    assert all(x != y for x, y in zip(a[2:], b[2:], strict=True))  # block 2 holds the first differing token


def test_keys_depend_on_tokens_not_on_how_the_runs_were_cut():
    keys = BlockKeys(16)
    whole = seq(("x", 0, 64))
    pieces = seq(("x", 0, 10)) + seq(("x", 10, 30)) + seq(("x", 40, 24))
    assert keys.chain(whole, 4).keys == keys.chain(pieces, 4).keys


def test_a_block_after_a_different_prefix_differs_even_with_equal_tokens():
    keys = BlockKeys(16)
    a = keys.chain(seq(("p", 0, 16), ("x", 0, 16)), 2).keys
    b = keys.chain(seq(("q", 0, 16), ("x", 0, 16)), 2).keys
    assert a[1] != b[1]  # the chain: a block's key stands for the whole prefix


def test_only_whole_blocks_and_extension_in_place():
    keys = BlockKeys(16)
    tokens = seq(("x", 0, 50))
    known = keys.chain(tokens, 1)
    assert keys.chain(tokens, 99, known) is known and len(known.keys) == 3


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 40), st.integers(1, 40)), min_size=1, max_size=8
    ),
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 40), st.integers(1, 40)), min_size=1, max_size=8
    ),
    st.sampled_from((1, 3, 16)),
    st.lists(st.integers(0, 12), max_size=4),
)
def test_keys_are_equal_exactly_where_the_prefixes_are(parts, other_parts, size, steps):
    """Block i's keys agree exactly when the tokens [0, (i + 1) * size) do; extending a chain step by step
    gives the keys a chain made at once gives."""
    keys = BlockKeys(size)
    one, other = seq(*parts), seq(*other_parts)
    grown = keys.chain(one, 0)
    for stop in sorted(steps):
        keys.chain(one, stop, grown)
    whole = keys.chain(one, 10**6).keys
    assert keys.chain(one, 10**6, grown).keys == whole and len(whole) == len(one) // size
    theirs = keys.chain(other, 10**6).keys
    for index, (mine, their) in enumerate(zip(whole, theirs, strict=False)):
        end = (index + 1) * size
        assert (mine == their) == (one.slice(0, end) == other.slice(0, end)), index


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.integers(0, 2**64 - 1))
def test_a_key_is_the_digest_then_the_end_as_8_little_endian_bytes_read_as_a_number(digest, end):
    assert pack_key(digest, end) == digest + end.to_bytes(8, "little")
    assert block_key(digest, end) == int.from_bytes(digest + end.to_bytes(8, "big"), "big")


def test_a_chain_s_keys_are_its_run_digests_with_each_block_s_end_in_its_run():
    """Each key built block by block as its run's digest then the end (``block_key``); a run's digest takes
    the key of the previous run's end (``ONE_DIGEST``)."""
    tokens = seq(("x", 0, 40), ("y", 5, 70))
    chain = BlockKeys(16).chain(tokens, 6)
    x_at = _digest(ROOT + repr(("r:x", 0)).encode())
    y_at = _digest(pack_key(x_at, 40) + repr(("r:y", 5)).encode())
    expected = [block_key(x_at, end) for end in (16, 32)]
    expected += [block_key(y_at, end) for end in (8, 24, 40, 56)]  # blocks end at 48..96: -40
    assert chain.keys == expected


def test_the_reference_chain_digests_the_runs_before_apart(monkeypatch):
    """Off (``ONE_DIGEST``), the reference: the runs before a run have their own digest."""
    monkeypatch.setattr(block_keys, "ONE_DIGEST", False)
    tokens = seq(("x", 0, 40), ("y", 5, 70))
    chain = BlockKeys(16).chain(tokens, 6)
    x_at = _digest(ROOT + repr(("r:x", 0)).encode())
    y_at = _digest(_digest(ROOT + repr(("r:x", 0, 40)).encode()) + repr(("r:y", 5)).encode())
    expected = [block_key(x_at, end) for end in (16, 32)]
    expected += [block_key(y_at, end) for end in (8, 24, 40, 56)]  # blocks end at 48..96: -40
    assert chain.keys == expected
