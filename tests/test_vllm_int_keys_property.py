"""vLLM's block keys as ints (``sim/cache/blocks/keys.py``, ``INT_KEYS``) against the reference's bytes (off):
each int key is the reference's key read as a number (the digest big-endian, then the end: one-to-one, so the
same keys are equal), over generated token runs and chains extended step by step; and whole ``vllm`` runs with
the switch on and off are the same run. The cache map keeps a dict per group keyed by these keys
(``cache_map.py``); ``tests/test_vllm_manager.py``'s scheduler runs check the map (``check_integrity``) at
every step, with the int keys (the default)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_vllm_by_id_property import RUNS

from sim.cache.blocks import keys as block_keys
from sim.cache.blocks.keys import BlockKeys, block_key, pack_key
from sim.run.simulate import SimConfig, simulate
from sim.tokens import TokenSeq
from sim.trace.generate import fanout

runs = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(0, 30), st.integers(1, 50)), min_size=1, max_size=6
)


def as_int(packed: bytes) -> int:
    """The reference's key read as the int key: the digest big-endian, shifted past the end's 64 bits."""
    return int.from_bytes(packed[:16], "big") << 64 | int.from_bytes(packed[16:], "little")


def chains(parts: list, size: int, steps: list[int], int_keys: bool, monkeypatch) -> list:
    monkeypatch.setattr(block_keys, "INT_KEYS", int_keys)
    tokens = TokenSeq([("r:" + source, start, length) for source, start, length in parts])
    keys = BlockKeys(size)
    grown = keys.chain(tokens, 0)
    for stop in sorted(steps):
        keys.chain(tokens, stop, grown)
    return keys.chain(tokens, 10**6, grown).keys


@settings(max_examples=200, deadline=None)
@example(parts=[("a", 0, 40), ("b", 5, 70)], size=16, steps=[1, 3])  # two runs, a block across them
@given(parts=runs, size=st.sampled_from((1, 3, 16)), steps=st.lists(st.integers(0, 12), max_size=4))
def test_each_int_key_is_the_reference_key_read_as_a_number(parts, size, steps):
    with pytest.MonkeyPatch.context() as monkeypatch:
        ints = chains(parts, size, steps, True, monkeypatch)
        packed = chains(parts, size, steps, False, monkeypatch)
    assert all(isinstance(key, int) for key in ints) and all(isinstance(key, bytes) for key in packed)
    assert ints == list(map(as_int, packed))


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.integers(0, 2**64 - 1))
def test_block_key_is_the_packed_key_read_as_a_number(digest, end):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(block_keys, "INT_KEYS", False)
        packed = block_key(digest, end)
    assert packed == pack_key(digest, end) == digest + end.to_bytes(8, "little")
    assert block_key(digest, end) == as_int(packed)


SMALL_POOL = (
    fanout(2, 10, 200, 40, 60),
    SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=1500),
)


@pytest.mark.parametrize("case", range(len(RUNS) + 1))
def test_whole_runs_are_the_same_with_int_keys_and_bytes(case, monkeypatch):
    trace, config = RUNS[case] if case < len(RUNS) else SMALL_POOL

    def run(int_keys: bool) -> tuple:
        monkeypatch.setattr(block_keys, "INT_KEYS", int_keys)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    assert on[1].summary.requests == len(trace.requests) and on[1].summary.cached_tokens > 0
