"""A descent that takes again the child a node's last descent took, where its carried compare holds that child's
first page (``segment_trie.CHILD_CACHED``), builds the reference's trie: the same nodes, ids, parents, depths, labels
and children (in order), and every event covering the same nodes.

Drawn: the bounds' small traces (follow-ups quoting an earlier output, sometimes one that quotes another), replay's
events cut into chunks and interleaved (``test_segment_trie.event_logs``: cuts inside shared pages, so nodes split
after a descent took them), pages 1, 2, 4, 8, the compare carried or not; and the run's sequences cut short
(SGLang's)."""

from __future__ import annotations

import os
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_segment_trie import event_logs

from sim.bounds import segment_trie
from sim.bounds.events import Lookup, Produce
from sim.bounds.segment_trie import SegmentTrie
from sim.trace import Request, Segment, Trace
from tests.bounds_helpers import small_traces

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))


def same_trie(
    trace: Trace, page: int, events: list, seqs: dict | None = None, carry: bool = True
) -> SegmentTrie:
    built = []
    for cached in (True, False):
        with (
            mock.patch.object(segment_trie, "CHILD_CACHED", cached),
            mock.patch.object(segment_trie, "CARRY_COMPARE", carry),
        ):
            built.append(SegmentTrie(trace, page, events, seqs))
    fast, reference = built
    assert (fast.parent, fast.depth, fast._label_at) == (
        reference.parent,
        reference.depth,
        reference._label_at,
    )
    assert fast._label_seq == reference._label_seq
    assert [list(c.items()) for c in fast._children] == [list(c.items()) for c in reference._children]
    assert [fast.pages(event) for event in events] == [reference.pages(event) for event in events]
    return fast


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    trace=small_traces(max_requests=8),
    page=st.sampled_from([1, 2, 4, 8]),
    carry=st.booleans(),
)
def test_child_taken_again_builds_the_reference_trie(data, trace, page, carry):
    same_trie(trace, page, data.draw(event_logs(trace, page)), carry=carry)


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), trace=small_traces(max_requests=8), page=st.sampled_from([1, 2, 4]))
def test_child_taken_again_over_sequences_cut_short(data, trace, page):
    """The run's own sequences, some a few tokens short of the trace's (each event still within them)."""
    events = data.draw(event_logs(trace, page))
    deepest: dict[str, int] = {}
    for event in events:
        end = event.key_pages if isinstance(event, Lookup) else event.end_page
        deepest[event.request_id] = max(deepest.get(event.request_id, 0), end)
    seqs = {}
    for request_id, pages in deepest.items():
        seq = trace.request_seq(request_id)
        room = len(seq) - pages * page - 1
        seqs[request_id] = seq.slice(0, len(seq) - data.draw(st.integers(0, max(room, 0))))
    same_trie(trace, page, events, seqs)


def test_a_follow_up_takes_the_quoted_path_again_and_parts_where_it_splits():
    """r1 quotes r0 (its prompt and output) and takes r0's nodes again past the first (its compare carried); r2
    quotes r1 but parts from it after the system prompt, inside r0's second node: split there (page 4), and r1's
    descent's remembered child there is no longer the node's own (its parent is the split's upper part)."""
    head = [Segment(ref="sys", len=16)]
    trace = Trace(
        [
            Request(id="r0", arrival=0.0, prompt=head, output_len=9),
            Request(id="r1", prompt=head + [Segment(output_of="r0"), Segment(ref="u", len=6)], output_len=3, after="r0"),
            Request(id="r2", prompt=head + [Segment(output_of="r1", len=2)], output_len=2, after="r1"),
            Request(id="r3", prompt=head + [Segment(output_of="r0"), Segment(ref="v", len=6)], output_len=3, after="r0"),
        ]
    )  # fmt: skip
    events = [Lookup("r0", 3, True), Produce("r0", 0, 6), Lookup("r1", 7, True), Produce("r1", 3, 8)]
    events += [Lookup("r2", 4, True), Produce("r2", 0, 4), Lookup("r3", 7, True), Produce("r3", 3, 8)]
    trie = same_trie(trace, 4, events)
    assert [trie.depth[node] for node in trie.pages(events[2])] == [3, 4, 6, 7]
    assert [trie.depth[node] for node in trie.pages(events[4])] == [3, 4]
    assert [trie.depth[node] for node in trie.pages(events[6])] == [3, 4, 6, 7]
