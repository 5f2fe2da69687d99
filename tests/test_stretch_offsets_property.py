"""A freeing stretch's steps walked from their runs of steps (``stretch_record.OFFSETS_WALKED``) log what the
reference logs from the list of every step's offset (``StretchSteps.token_offsets``).

Drawn: open runs (some holding the stretch's first page, some a page or more behind, some none), each request's
last computed page (some inside the stretch), runs of 0-4 steps a token to two pages + 1 apart, now and then one
before the run before it, pages 1, 2, 4, 16. The same calls of ``produce``, in order, and the same runs after; a
``produce`` that opens a run as the recorder's log would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.bounds import stretch_record
from sim.sched.stretch_steps import StretchSteps

IDS = ("a", "b", "c", "d")


@st.composite
def stretch_cases(draw):
    page = draw(st.sampled_from([1, 2, 4, 16]))
    lengths = [draw(st.integers(0, 40)) for _ in IDS]
    runs = {}
    for request_id, length in zip(IDS, lengths, strict=True):
        if draw(st.booleans()):
            first = max(length // page - draw(st.integers(0, 3)), 0)
            runs[request_id] = [0, first, first + draw(st.integers(0, 3))]
    last_page = {
        request_id: length // page + draw(st.integers(0, 30)) for request_id, length in zip(IDS, lengths, strict=True)
    }
    offsets, counts, at = [], [], draw(st.integers(0, 3))
    for _ in range(draw(st.integers(0, 6))):
        count = draw(st.integers(0, 4))
        offsets.append(at)
        counts.append(count)
        gap = draw(st.sampled_from([1, 1, page, page + 1, 2 * page + 1, -2]))
        at = max(at + max(count - 1, 0) + gap, 0)
    return page, lengths, runs, last_page, offsets, counts


def logged(case, walked: bool) -> tuple[list, dict]:
    page, lengths, runs, last_page, offsets, counts = case
    runs = {request_id: list(run) for request_id, run in runs.items()}
    calls: list[tuple[str, int, int]] = []

    def produce(
        request_id: str, first: int, end: int
    ) -> None:  # opens or moves the request's run, as the log does
        calls.append((request_id, first, end))
        if first < last_page[request_id]:
            runs[request_id] = [len(calls), first, min(end, last_page[request_id])]

    steps = StretchSteps(7, list(IDS), list(lengths), list(offsets), list(counts))
    before = stretch_record.OFFSETS_WALKED
    stretch_record.OFFSETS_WALKED = walked
    try:
        stretch_record.record_stretch(steps, page, runs, last_page, produce)
    finally:
        stretch_record.OFFSETS_WALKED = before
    return calls, runs


@settings(max_examples=400, deadline=None)
@given(case=stretch_cases())
def test_walked_offsets_log_what_the_listed_offsets_log(case):
    assert logged(case, walked=True) == logged(case, walked=False)


def test_walk_spans_reads_the_listed_steps():
    """The gap check, the first and the last step from the runs: as ``close_steps`` and the list read them."""
    for offsets, counts, page in (
        ([0, 3, 9], [3, 2, 1], 2),
        ([0, 3, 9], [3, 2, 1], 5),
        ([4, 1], [1, 1], 1),
        ([2, 5, 6], [0, 1, 0], 1),
        ([], [], 4),
    ):
        tokens = StretchSteps(0, [], [], offsets, counts).token_offsets()
        expected = (len(tokens), stretch_record.close_steps(tokens, page) if tokens else True)
        expected += (tokens[0], tokens[-1]) if tokens else (0, -1)
        assert stretch_record.walk_spans(offsets, counts, page) == expected
