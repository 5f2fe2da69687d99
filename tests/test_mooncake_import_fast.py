"""The Mooncake import's fast paths against their references: whole blocks read as one slice of a prompt's ids
(``WHOLE_BLOCKS_SLICED``) make the segments block-by-block clipping makes, and the import with the cycle
collector paused (``IMPORT_PAUSED``) gives the same trace and puts the caller's collector back."""

from __future__ import annotations

import gc
import json
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.trace import TraceError, mooncake_import
from sim.trace.mooncake_import import MOONCAKE_BLOCK_LEN, _Builder, import_mooncake_counted

B = MOONCAKE_BLOCK_LEN
# a bound on or near a block's edge, or anywhere: the cases the slice's arithmetic tells apart
_BOUNDS = st.one_of(
    st.integers(0, 7).map(lambda i: i * B),
    st.tuples(st.integers(0, 7), st.sampled_from([-1, 1, B // 2])).map(lambda t: max(0, t[0] * B + t[1])),
    st.integers(0, 8 * B),
)
_CALLS = st.lists(
    st.tuples(st.lists(st.integers(0, 9), max_size=8), _BOUNDS, _BOUNDS), min_size=1, max_size=6
)


def _segments_of(calls, sliced: bool) -> tuple[list, list]:
    """Every call's segments, and the shared whole-block segments in the order they were made."""
    builder = _Builder(None)
    with mock.patch.object(mooncake_import, "WHOLE_BLOCKS_SLICED", sliced):
        made = [builder._segments(hash_ids, start, end) for hash_ids, start, end in calls]
    return made, list(builder.blocks.items())


@settings(max_examples=400, deadline=None)
@given(calls=_CALLS)
def test_sliced_segments_are_the_block_by_block_ones(calls):
    # ids of either length against either bound: short lists and bounds past them included (the reference
    # stops at the last id; the checked import never asks that, the slice must not differ where it could)
    sliced, blocks = _segments_of(calls, True)
    reference, reference_blocks = _segments_of(calls, False)
    assert sliced == reference
    assert blocks == reference_blocks
    for got, want in zip(sliced, reference, strict=True):  # whole blocks stay the one shared object
        assert [s is dict(blocks).get(int(s.ref[2:])) for s in got if s.ref and "@" not in s.ref] == [
            w is dict(reference_blocks).get(int(w.ref[2:])) for w in want if w.ref and "@" not in w.ref
        ]


def _follow_up_lines(num: int) -> list[str]:
    """Turns that each resend the one before, its answer and a few more tokens: follow-ups that start inside a
    block, end inside one, and (for the first turns) start and end in the same block."""
    lines, input_len, hash_ids, next_id = [], 1100, [1, 2, 3], 4
    for index in range(num):
        record = {
            "timestamp": index,
            "input_length": input_len,
            "output_length": 37 + index,
            "hash_ids": hash_ids,
        }
        lines.append(json.dumps(record))
        hash_ids = hash_ids[: input_len // B]  # the full blocks resent; the partial tail's block differs
        input_len += 40 + 37 * index + 97 * (index % 3)
        while len(hash_ids) < -(-input_len // B):
            hash_ids, next_id = [*hash_ids, next_id], next_id + 1
    return lines


@pytest.mark.parametrize("chains", [True, False])
@pytest.mark.parametrize("switch", ["WHOLE_BLOCKS_SLICED", "IMPORT_PAUSED"])
def test_imports_equal_both_ways(chains, switch, data_dir, tmp_path):
    follow_ups = tmp_path / "follow_ups.jsonl"
    follow_ups.write_text("\n".join(_follow_up_lines(12)) + "\n")
    assert import_mooncake_counted(follow_ups)[1].followups == 11  # each turn follows the one before
    for path in (
        data_dir / "mooncake_conversation_head.jsonl",
        data_dir / "mooncake_synthetic_head.jsonl",
        follow_ups,
    ):
        _assert_same_import(path, chains, switch)


def test_the_real_trace_imports_equal_both_ways(shared_traces):
    for switch in ("WHOLE_BLOCKS_SLICED", "IMPORT_PAUSED"):
        _assert_same_import(shared_traces / "mooncake" / "conversation_trace.jsonl", True, switch, limit=1500)


def _assert_same_import(path, chains: bool, switch: str, limit: int | None = None) -> None:
    fast, fast_counts = import_mooncake_counted(path, limit, chains=chains)
    with mock.patch.object(mooncake_import, switch, False):
        reference, reference_counts = import_mooncake_counted(path, limit, chains=chains)
    assert fast.requests == reference.requests
    assert fast_counts == reference_counts


@pytest.mark.parametrize("enabled", [True, False])
def test_the_import_pauses_the_collector_and_gives_the_callers_back(enabled, data_dir, tmp_path, monkeypatch):
    seen = []
    parse = mooncake_import._parse
    monkeypatch.setattr(mooncake_import, "_parse", lambda *args: seen.append(gc.isenabled()) or parse(*args))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, 2]}\n')
    was_enabled = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        import_mooncake_counted(data_dir / "mooncake_conversation_head.jsonl")
        assert gc.isenabled() == enabled
        with pytest.raises(TraceError):
            import_mooncake_counted(bad)
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was_enabled else gc.disable)()
    assert seen and not any(seen)
