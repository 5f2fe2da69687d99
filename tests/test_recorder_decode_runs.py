"""The recorder reads a batch run's page steps taken at once from their lengths (``recorder.RUN_FROM_LENGTHS``) as the
reference reads their items, also for a request whose output a looked-up request quotes (its pages are then logged
step by step, never folded): the loops' runs hardly make one (a quoting request follows the one it quotes), so it is
built here by hand, beside a request whose run is open and one past its last computed page."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pytest

from sim.bounds import recorder as recorder_module
from sim.bounds.recorder import EventRecorder
from sim.cache.events import EventBus
from sim.cache.results import ChunkPlan
from sim.sched.batch import Batch, BatchItem, DecodeBatch
from sim.trace import Request, Segment, Trace

TRACE = Trace(
    [
        Request(id="r0", arrival=0.0, prompt=[Segment(ref="a", len=8)], output_len=30),
        Request(id="r1", arrival=0.0, prompt=[Segment(ref="b", len=5)], output_len=30),
        Request(id="r2", arrival=0.0, prompt=[Segment(ref="c", len=6)], output_len=4),
        Request(
            id="r3", arrival=0.5, prompt=[Segment(ref="a", len=8), Segment(output_of="r0")], output_len=2
        ),
    ]
)


def prefilled(page: int) -> tuple:
    """A recorder after r0, r1, r2 were admitted and prefilled and r3 (quoting r0's output) looked up."""
    prompts = {"r0": 8, "r1": 5, "r2": 6, "r3": 8}
    reqs = {rid: SimpleNamespace(request_id=rid, state=None, prompt_len=prompts[rid]) for rid in prompts}
    manager = SimpleNamespace(requests=reqs)
    recorder = EventRecorder(EventBus(), TRACE, page)
    for rid in ("r0", "r1", "r2"):
        recorder.record(Batch(0, [BatchItem(ChunkPlan(rid, 0, prompts[rid], None), True)]), manager)
    recorder.record(Batch(1, [BatchItem(ChunkPlan("r3", 0, 4, None), True)]), manager)
    return recorder, manager, reqs


def recorded_log(page: int, from_lengths: bool, num_steps: int) -> list:
    """r0, r1, r2 admitted and prefilled, r3 (quoting r0's output) looked up, then a run of ``num_steps`` decode
    steps of r0, r1, r2 from their prompts' ends (r2 past its last computed page part-way)."""
    recorder, manager, reqs = prefilled(page)
    run = DecodeBatch.of_requests(2, [reqs[rid] for rid in ("r0", "r1", "r2")], [8, 5, 6], 0)
    with mock.patch.object(recorder_module, "RUN_FROM_LENGTHS", from_lengths):
        recorder.record(run, manager, num_steps)
    return recorder.events({"r0", "r1", "r2", "r3"})


@pytest.mark.parametrize("num_steps", [2, 3, 7])
@pytest.mark.parametrize("page", [1, 2, 4])
def test_a_run_read_from_lengths_logs_what_its_items_do(page, num_steps):
    fast = recorded_log(page, True, num_steps)
    assert fast == recorded_log(page, False, num_steps)
    # r0's output is quoted: each of its steps in the run is its own event, never folded
    r0_steps = [e for e in fast if e.request_id == "r0" and getattr(e, "first_page", 0) * page >= 8]
    assert len(r0_steps) == num_steps


def stepped_log(page: int, inline: bool, offsets: list[int]) -> tuple[list, int]:
    """As ``recorded_log``, decode steps ``offsets`` tokens on, one batch each (``_record_decode_step``), with
    ``INLINE_RUN_EXTENSION`` ``inline``: the log, and how many tokens went through ``_produce``."""
    recorder, manager, reqs = prefilled(page)
    produced = []
    original = EventRecorder._produce

    def counted(self, *args):
        produced.append(args)
        original(self, *args)

    with (
        mock.patch.object(recorder_module, "INLINE_RUN_EXTENSION", inline),
        mock.patch.object(EventRecorder, "_produce", counted),
    ):
        for step, offset in enumerate(offsets):
            batch = DecodeBatch.of_requests(
                2 + step, [reqs[rid] for rid in ("r0", "r1", "r2")], [8, 5, 6], offset
            )
            recorder.record(batch, manager)
    return recorder.events({"r0", "r1", "r2", "r3"}), len(produced)


@pytest.mark.parametrize("page", [1, 2, 4])
def test_a_step_extending_its_open_run_logs_what_the_produce_path_does(page):
    """r1's run (its output unquoted) is extended in place at every page it starts, r2's too until its last
    computed page, then never; r0's pages (quoted) each go through ``_produce``: the same log as the reference,
    with at least the 24 tokens of r1 and r2 that start pages at page 1 taken in place (fewer at 2 and 4)."""
    fast, fast_produced = stepped_log(page, True, list(range(25)))
    reference, reference_produced = stepped_log(page, False, list(range(25)))
    assert fast == reference
    assert reference_produced - fast_produced >= 24 // page


@pytest.mark.parametrize("page", [1, 2, 4])
def test_a_step_past_its_open_run_by_a_gap_opens_a_new_run(page):
    """Steps whose tokens skip pages (the loops announce every step that starts a page, the recorder's contract
    does not ask it): a token pages past its run's end is no extension, as in the reference."""
    offsets = [0, 1, 5, 6, 13, 14, 22]
    assert stepped_log(page, True, offsets)[0] == stepped_log(page, False, offsets)[0]
