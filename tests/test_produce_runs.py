"""A request's pages between two lookups logged as one run (``events.ProduceRuns``, what the timed recorder
logs) give the bounds the per-page log gives: Belady's hits request by request and every bound figure of the
summary, on timed-like logs (pages produced one or a few at a time, chunks overlapping by a page, requests
interleaved, re-admissions), the per-page log on the per-page trie (``PagePaths``) as the reference; and the
recorder's merged log is ``merge_runs`` of its per-page one in a real timed run."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.bounds.belady import belady_hits
from sim.bounds.events import Lookup, Produce, computed_pages, key_pages
from sim.bounds.page_paths import PagePaths
from sim.bounds.recorder import EventRecorder, merge_runs
from sim.bounds.segment_trie import SegmentTrie
from sim.bounds.state_bound import state_options
from sim.bounds.summary import bounds_summary, served_ids
from sim.cache.components import FULL, MAMBA, SWA
from sim.run.replay import replay_order
from sim.run.setup import build
from sim.run.simulate import SimConfig, run_timed
from sim.trace import Request, Segment, Trace
from tests.bounds_helpers import small_traces

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))
CAPACITIES = (0, 1, 3, 7, 20, 1000)
CAPS = (
    {FULL: 5, MAMBA: 2, SWA: 9},
    {FULL: 40, MAMBA: 1, SWA: 40},
    {FULL: 3, MAMBA: 9, SWA: 9},
    {FULL: 1000, MAMBA: 3, SWA: 1000},
)


@st.composite
def page_logs(draw, trace: Trace, page: int) -> list:
    """Per request: maybe an admission that computes part of it and is dropped (an uncounted lookup), then
    its lookup and its pages, produced one to three at a time, a chunk sometimes starting a page before the
    last one's end (a chunk ending mid-page), or past it, or at page 0 (no recorder logs those: merging
    must not assume it); up to four requests' streams interleaved, their order kept (a follow-up may start
    before the request it quotes is done, as an open-loop one can)."""
    streams = {}
    for request_id in replay_order(trace):
        num_pages = computed_pages(trace, request_id, page)
        lookup = Lookup(request_id, key_pages(trace.prompt_len(request_id), page), False)
        stream: list = []
        if draw(st.booleans()):
            stream += [lookup] + draw(chunks(request_id, draw(st.integers(0, num_pages))))
        streams[request_id] = stream + [lookup._replace(counted=True)] + draw(chunks(request_id, num_pages))
    events: list = []
    while streams:
        ready = list(streams)[:4]
        stream = streams[ready[draw(st.integers(0, len(ready) - 1))]]
        events.append(stream.pop(0))
        streams = {r: s for r, s in streams.items() if s}
    return events


@st.composite
def chunks(draw, request_id: str, num_pages: int) -> list:
    produced, at = [], 0
    while at < num_pages:
        start = max(at + draw(st.sampled_from([0, 0, 0, -1, 1, -at])), 0)  # mostly where it left off
        end = min(at + draw(st.integers(1, 3)), num_pages)
        produced.append(Produce(request_id, start, end))
        at = end
    return produced


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    trace=small_traces(max_requests=8),
    page=st.sampled_from([1, 2, 4]),
    caps=st.sampled_from(CAPS),
)
def test_runs_give_the_bounds_of_the_per_page_log(data, trace, page, caps):
    per_page = data.draw(page_logs(trace, page))
    runs = merge_runs(per_page, trace, page)
    assert [e for e in runs if isinstance(e, Lookup)] == [e for e in per_page if isinstance(e, Lookup)]
    pages, segments = PagePaths(trace, page), SegmentTrie(trace, page, runs)
    for capacity in CAPACITIES:
        assert belady_hits(runs, segments, capacity) == belady_hits(per_page, pages, capacity), capacity
    assert deepest_options(state_options(runs, segments)) == deepest_options(state_options(per_page, pages))
    figures = [bounds_summary(trace, log, page, caps, True, True, 10) for log in (per_page, runs)]
    assert figures[0] == figures[1]  # the state bound's 400 steps are slow: one budget per example


def deepest_options(options) -> dict[tuple, float]:
    """(request, first, last lookup) -> the deepest option's weight: what the state bound's value reads (a
    shallower option with the same lookups never wins; the per-page log may list some a run does not)."""
    deepest: dict[tuple, float] = {}
    for owner, weight, first, last in zip(
        *(getattr(options, f).tolist() for f in ("owner", "weight", "first", "last")), strict=True
    ):
        key = (options.requests[owner], first, last)
        deepest[key] = max(deepest.get(key, 0.0), weight)
    return deepest


def test_runs_fold_a_requests_output_pages_until_a_lookup():
    trace = Trace(
        [
            Request(id="a", arrival=0.0, prompt=[Segment(ref="s", len=8)], output_len=12),
            Request(id="b", arrival=0.0, prompt=[Segment(ref="s", len=20)], output_len=20),
            Request(id="c", arrival=0.0, prompt=[Segment(ref="s", len=4)], output_len=2),
        ]
    )
    log = [
        Lookup("a", 1, True),
        Produce("a", 0, 2),
        Produce("b", 5, 6),
        Produce("a", 2, 3),
        Produce("b", 6, 7),
    ]
    log += [Produce("a", 3, 4), Produce("b", 8, 10), Produce("b", 7, 9), Lookup("c", 0, True)]
    log += [Produce("a", 4, 5), Produce("a", 5, 6)]
    assert merge_runs(log, trace, 4) == [
        Lookup("a", 1, True),
        Produce("a", 0, 2),  # prompt pages (page 2 is a's first with output) stay as they come
        Produce("b", 5, 7),  # b's gap ends its run where it was opened
        Produce("a", 2, 4),
        Produce("b", 8, 10),  # and so does a start before the run's
        Produce("b", 7, 9),
        Lookup("c", 0, True),  # a lookup ends every run
        Produce("a", 4, 6),
    ]


def test_an_output_quoted_by_a_request_looked_up_is_never_folded_again():
    prompt = [Segment(ref="s", len=4)]
    trace = Trace(
        [
            Request(id="a", arrival=0.0, prompt=prompt, output_len=9),
            Request(id="b", arrival=1.0, prompt=prompt + [Segment(output_of="a")], output_len=2),
        ]
    )
    log = [Lookup("a", 0, True), Produce("a", 1, 2), Produce("a", 2, 3), Lookup("b", 1, True)]
    log += [Produce("a", 3, 4), Produce("a", 4, 5)]  # b may compute a's output pages beside a now
    assert merge_runs(log, trace, 4) == [Lookup("a", 0, True), Produce("a", 1, 3)] + log[3:]


@settings(max_examples=max(EXAMPLES // 8, 8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), preset=st.sampled_from(["marconi-sglang", "freetoken", "radix"]))
def test_the_recorder_logs_the_runs_of_its_per_page_log(trace, preset):
    config = SimConfig(
        policy=preset,
        model="tiny",
        mode="timed",
        pool_tokens=96,
        mamba_states=4,
        knobs={"page_size": 1} if preset != "freetoken" else {},
    )
    recorders: list[EventRecorder] = []

    def observe(bus):
        recorders.extend(EventRecorder(bus, trace, 1, merge_runs=merge) for merge in (True, False))

    result = run_timed(trace, build(config), observe=observe)
    served = served_ids(result.requests)
    merged, per_page = (recorder.events(served) for recorder in recorders)
    assert merged == merge_runs(per_page, trace, 1)
    assert len(per_page) >= len(merged)
