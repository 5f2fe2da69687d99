"""Mooncake chain inference on hand-made lines: parent choice, the partial tail, outputs longer than the
follow-up, what is refused; and the real conversation trace's chains."""
from __future__ import annotations

import itertools
import json

import pytest

from sim.trace import Segment, load_trace
from sim.trace.mooncake_chains import ChainFinder
from sim.trace.mooncake_import import import_mooncake, import_mooncake_counted
from sim.trace.stats import trace_stats


def _mc(input_length: int, hash_ids: list[int], output_length: int = 50, timestamp: int = 0) -> dict:
    return {"timestamp": timestamp, "input_length": input_length, "output_length": output_length,
            "hash_ids": hash_ids}


def _import(write_lines, lines, **options):
    return import_mooncake_counted(write_lines(lines, "mooncake.jsonl"), **options)


def _ref(ref: str, length: int) -> Segment:
    return Segment(ref=ref, len=length)


def test_latest_of_equal_parents_is_chosen_and_the_tail_is_the_parents(write_lines):
    trace, counts = _import(write_lines, [
        _mc(1200, [1, 2, 3]),  # mc-1: full blocks 1, 2, then a 176-token tail
        _mc(1100, [1, 2, 4], output_length=60),  # mc-2: the same full blocks, a shorter tail (an edit)
        _mc(1800, [1, 2, 5, 6]),  # mc-3: extends both; the latest, mc-2, is the parent
    ])
    assert trace.request("mc-3").prompt == [
        _ref("mc1", 512), _ref("mc2", 512), _ref("mc4", 76),  # mc-2's prompt, its partial tail included
        Segment(len=60, output_of="mc-2"),  # all of mc-2's output
        _ref("mc5@136", 376), _ref("mc6", 264)]  # the new tokens: the rest of block 5 from 1160, block 6
    assert trace.prompt_len("mc-3") == 1800
    assert trace.prompt_seq("mc-3").common_prefix_len(trace.request_seq("mc-2")) == 1160
    assert trace.prompt_seq("mc-3").common_prefix_len(trace.prompt_seq("mc-1")) == 1024
    assert (counts.followups, counts.ambiguous, counts.output_cut) == (1, 1, 0)


def test_the_longest_match_beats_a_later_shorter_one(write_lines):
    trace, counts = _import(write_lines, [
        _mc(1100, [1, 2, 3], output_length=30),  # mc-1
        _mc(1700, [1, 2, 5, 6], output_length=40),  # mc-2 follows mc-1; its full blocks are 1, 2, 5
        _mc(1150, [1, 2, 7]),  # mc-3: a later request with full blocks 1, 2 (a sibling of mc-1)
        _mc(2400, [1, 2, 5, 8, 9]),  # mc-4: extends mc-2's three full blocks: mc-2, not mc-3
    ])
    prompt = trace.request("mc-4").prompt
    assert prompt[:len(trace.request("mc-2").prompt)] == trace.request("mc-2").prompt
    assert [s.output_of for s in prompt if s.output_of] == ["mc-1", "mc-2"]
    assert trace.prompt_seq("mc-4").common_prefix_len(trace.request_seq("mc-2")) == 1740
    assert counts.followups == 3 and counts.ambiguous == 0  # mc-3 follows mc-1 too


def test_output_longer_than_the_follow_up_reaches_is_cut(write_lines):
    trace, counts = _import(write_lines, [_mc(1100, [1, 2, 3], output_length=500), _mc(1300, [1, 2, 9])])
    assert trace.request("mc-2").prompt == [_ref("mc1", 512), _ref("mc2", 512), _ref("mc3", 76),
                                            Segment(len=200, output_of="mc-1")]
    assert (counts.followups, counts.output_cut) == (1, 1)
    # --whole-output-only takes such a request for a sibling
    trace, counts = _import(write_lines, [_mc(1100, [1, 2, 3], output_length=500), _mc(1300, [1, 2, 9])],
                            whole_output_only=True)
    assert counts.followups == 0 and trace.request("mc-2").prompt[-1] == _ref("mc9", 276)


def test_a_parent_ending_on_a_block_boundary_has_no_tail(write_lines):
    trace, _ = _import(write_lines, [_mc(1024, [1, 2], output_length=10), _mc(1100, [1, 2, 3])])
    assert trace.request("mc-2").prompt == [_ref("mc1", 512), _ref("mc2", 512), Segment(len=10, output_of="mc-1"),
                                            _ref("mc3@10", 66)]


@pytest.mark.parametrize("lines, why", [
    ([_mc(600, [1, 2]), _mc(1400, [1, 3, 4])], "one shared block (a system prompt) is not evidence"),
    ([_mc(1300, [1, 2, 3]), _mc(1200, [1, 2, 4])], "not longer than the earlier prompt"),
    ([_mc(1100, [1, 2, 3]), _mc(1500, [9, 2, 5])], "same id at the index but not the same prefix"),
])
def test_refused_matches_stay_plain(write_lines, lines, why):
    trace, counts = _import(write_lines, lines)
    assert counts.followups == 0, why
    assert all(s.output_of is None for r in trace for s in r.prompt)


def test_min_match_blocks_and_no_chains(write_lines):
    lines = [_mc(600, [1, 2]), _mc(1400, [1, 3, 4])]
    assert _import(write_lines, lines)[1].short_matches == 1
    assert _import(write_lines, lines, min_match_blocks=1)[1].followups == 1
    plain, counts = _import(write_lines, [_mc(1100, [1, 2, 3]), _mc(1800, [1, 2, 5, 6])], chains=False)
    assert counts.followups == 0
    assert [s.ref for s in plain.request("mc-2").prompt] == ["mc1", "mc2", "mc5", "mc6"]
    with pytest.raises(ValueError, match="min_match_blocks"):
        ChainFinder(0)


def test_chains_survive_a_write_and_load(write_lines, tmp_path):
    from sim.trace import write_trace

    trace, _ = _import(write_lines, [_mc(1100, [1, 2, 3]), _mc(1800, [1, 2, 5, 6], timestamp=7000)])
    write_trace(trace, tmp_path / "out.jsonl")
    loaded = load_trace(tmp_path / "out.jsonl")
    assert loaded.request("mc-2").arrival == 7.0  # arrival times kept as recorded
    assert json.loads((tmp_path / "out.jsonl").read_text().splitlines()[1])["prompt"][3] == \
        {"output_of": "mc-1", "len": 50}


def test_head_slice_tokens_agree_with_the_block_hashes(data_dir):
    """Requests that share their first m block ids share at least 512 m tokens, chains or not."""
    path = data_dir / "mooncake_conversation_head.jsonl"
    hashes = [json.loads(line)["hash_ids"] for line in path.read_text().splitlines()]
    trace = import_mooncake(path)
    ids = [r.id for r in trace]
    for a, b in itertools.combinations(range(len(ids)), 2):
        shared = next((i for i, (x, y) in enumerate(zip(hashes[a], hashes[b], strict=False)) if x != y),
                      min(len(hashes[a]), len(hashes[b])))
        common = trace.prompt_seq(ids[a]).common_prefix_len(trace.prompt_seq(ids[b]))
        whole = min(shared, trace.prompt_len(ids[a]) // 512, trace.prompt_len(ids[b]) // 512)
        assert common >= 512 * whole, (ids[a], ids[b])


def test_conversation_trace_keeps_its_multiturn_structure(shared_traces):
    trace, counts = import_mooncake_counted(shared_traces / "mooncake" / "conversation_trace.jsonl")
    with_output = sum(1 for r in trace if any(s.output_of for s in r.prompt))
    assert with_output == counts.followups >= 3000
    stats = trace_stats(trace)
    assert stats["followup_requests"] == with_output and stats["multiturn_chains"] > 1000
    assert stats["ideal_decode_region_hits"] > 0.9 * with_output


def test_synthetic_trace_still_imports(shared_traces):
    trace = import_mooncake(shared_traces / "mooncake" / "synthetic_trace.jsonl")
    assert len(trace) == 3993
