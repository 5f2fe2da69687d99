"""The compressed page trie gives the bounds the per-page trie gives: Belady's hits request by request and the
state bound's options, on generated traces and event logs (replay's, and timed-like ones: produced pages in
chunks, requests interleaved, re-admissions)."""

from __future__ import annotations

import os
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.bounds import segment_trie, trie_cursor
from sim.bounds.belady import belady_hits
from sim.bounds.events import Lookup, Produce, replay_events
from sim.bounds.page_paths import PagePaths
from sim.bounds.segment_trie import SegmentTrie
from sim.bounds.state_bound import state_options
from sim.run.replay import replay_order
from sim.trace import Request, Segment, Trace
from tests.bounds_helpers import small_traces

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))


@st.composite
def event_logs(draw, trace: Trace, page: int) -> list:
    """Replay's events with each request's pages produced in chunks, some lookups repeated uncounted
    before the counted one, and the requests' streams interleaved (their own order kept)."""
    order = replay_order(trace)
    streams = []
    for event in replay_events(trace, order, set(order), set(order), page):
        if isinstance(event, Lookup):
            streams.append([event._replace(counted=False)] * draw(st.integers(0, 1)) + [event])
            continue
        cuts = sorted(
            draw(st.sets(st.integers(event.first_page + 1, max(event.end_page - 1, 1)), max_size=3))
        )
        ends = [end for end in cuts if end < event.end_page] + [event.end_page]
        starts = [event.first_page] + ends[:-1]
        streams[-1] += [Produce(event.request_id, a, b) for a, b in zip(starts, ends, strict=True) if a < b]
    events: list = []
    while streams:
        stream = streams[draw(st.integers(0, min(len(streams), 3) - 1))]
        events.append(stream.pop(0))
        streams = [s for s in streams if s]
    return events


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), trace=small_traces(max_requests=8), page=st.sampled_from([1, 2, 4, 8]))
def test_segment_trie_bounds_equal_the_page_tries(data, trace, page):
    events = data.draw(event_logs(trace, page))
    segments, pages = SegmentTrie(trace, page, events), PagePaths(trace, page)
    for capacity in (0, 1, 3, 7, 20, 1000):
        assert belady_hits(events, segments, capacity) == belady_hits(events, pages, capacity), capacity
    by_segment, by_page = state_options(events, segments), state_options(events, pages)
    assert by_segment.requests == by_page.requests
    for field in ("owner", "weight", "first", "last"):
        assert getattr(by_segment, field).tolist() == getattr(by_page, field).tolist(), field


def test_a_node_is_a_chain_of_pages_cut_where_requests_part_and_events_end():
    prompt = [Segment(ref="sys", len=40)]
    trace = Trace(
        [
            Request(id="r0", arrival=0.0, prompt=prompt, output_len=1),
            Request(id="r1", arrival=1.0, prompt=prompt + [Segment(ref="u", len=8)], output_len=1),
        ]
    )
    order = replay_order(trace)
    events = replay_events(trace, order, set(order), set(order), 4)
    trie = SegmentTrie(trace, 4, events)
    # r0 computes 10 pages and looks up 9; r1 shares them, looks up 11 and computes 12: nodes end at 9, 10, 11, 12
    assert [trie.depth[node] for node in trie.pages(events[-1])] == [9, 10, 11, 12]
    assert trie.num_nodes == 5  # the root and four chains, where the page trie has 12 pages


def tries_alike(trace: Trace, page: int, events: list) -> None:
    """``LABELS_IN_PLACE`` (a cursor down each sequence, labels compared in place), with its cursor's keys and moves
    made directly (``trie_cursor.CURSOR_DIRECT``) or not, and a compare carried on to the next child of the same
    label (``CARRY_COMPARE``) or not, builds the reference's trie: the same nodes, parents and depths, and every
    event covering the same nodes."""
    built = []
    for in_place, direct, carry in (
        (True, True, True),
        (True, True, False),
        (True, False, True),
        (False, False, False),
    ):
        with (
            mock.patch.object(segment_trie, "LABELS_IN_PLACE", in_place),
            mock.patch.object(trie_cursor, "CURSOR_DIRECT", direct),
            mock.patch.object(segment_trie, "CARRY_COMPARE", carry),
        ):
            built.append(SegmentTrie(trace, page, events))
    reference = built[-1]
    for fast in built[:-1]:
        assert (fast.parent, fast.depth) == (reference.parent, reference.depth)
        assert [fast.pages(event) for event in events] == [reference.pages(event) for event in events]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), trace=small_traces(max_requests=8), page=st.sampled_from([1, 2, 4, 8]))
def test_labels_in_place_build_the_reference_trie(data, trace, page):
    tries_alike(trace, page, data.draw(event_logs(trace, page)))


def test_labels_in_place_where_pages_and_labels_span_runs():
    """Pages that span two segments (a key made from the sequence's slice), requests that part inside a page
    and inside a later segment of a label, a follow-up quoting an output: the same trie at pages 1, 4, 5."""
    head = [Segment(ref="a", len=6), Segment(ref="b", len=7)]
    trace = Trace(
        [
            Request(id="r0", arrival=0.0, prompt=head + [Segment(ref="c", len=9)], output_len=6),
            Request(id="r1", arrival=0.1, prompt=head + [Segment(ref="c", len=4), Segment(ref="d", len=5)], output_len=3),
            Request(id="r2", arrival=0.2, prompt=[Segment(ref="a", len=6), Segment(ref="e", len=9)], output_len=2),
            Request(id="r3", prompt=head + [Segment(ref="c", len=9), Segment(output_of="r0")], output_len=4, after="r0"),
        ]
    )  # fmt: skip
    order = replay_order(trace)
    for page in (1, 4, 5):
        events = replay_events(trace, order, set(order), set(order), page)
        events += [Produce("r1", 1, 3), Lookup("r2", 2, False), Produce("r3", 2, 5)]
        tries_alike(trace, page, events)
