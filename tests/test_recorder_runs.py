"""The bounds recorder given a batch run's page-starting steps at once (``StepStarted.num_steps``: each item a
token further at each step, ``EventRecorder._record_later_steps``) logs what it logs given those steps one by
one: generated step sequences of small traces (prefill chunks, re-admissions, decodes past a request's last
computed page, outputs quoted by a later lookup), pages 1, 2 and 4, merged and per-page logs."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.bounds.recorder import EventRecorder
from sim.cache.events import EventBus
from sim.cache.results import ChunkPlan
from sim.sched.batch import Batch, BatchItem
from sim.trace import Trace
from tests.bounds_helpers import small_traces


class _Manager:
    def __init__(self) -> None:
        self.requests: dict[str, object] = {}


def _batch(items: list[tuple[str, int, int]], shift: int = 0) -> Batch:
    return Batch(
        0, [BatchItem(ChunkPlan(rid, start + shift, end + shift, None), False) for rid, start, end in items]
    )


@st.composite
def step_sequences(draw, trace: Trace):
    """(re-admit these requests, the batch's items (request, start, end), num_steps) per recorded step."""
    ids = [request.id for request in trace]
    steps = []
    for _ in range(draw(st.integers(1, 12))):
        readmit = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))
        chosen = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=4, unique=True))
        items, num_steps = [], draw(st.sampled_from([1, 1, 2, 5, 30]))
        for rid in chosen:
            end_of_request = trace.prompt_len(rid) + trace.request(rid).output_len
            start = draw(st.integers(0, end_of_request + 3))
            length = 1 if num_steps > 1 else draw(st.integers(1, 9))
            items.append((rid, start, start + length))
        steps.append((readmit, items, num_steps))
    return steps


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    data=st.data(), trace=small_traces(max_requests=6), page=st.sampled_from([1, 2, 4]), merge=st.booleans()
)
def test_a_run_of_steps_at_once_logs_what_its_steps_one_by_one_log(data, trace, page, merge):
    steps = data.draw(step_sequences(trace))
    # fed by hand: nothing is sent on the bus
    at_once, one_by_one = (EventRecorder(EventBus(), trace, page, merge_runs=merge) for _ in range(2))
    manager = _Manager()
    for readmit, items, num_steps in steps:
        for rid in readmit + [rid for rid, _, _ in items if rid not in manager.requests]:
            # a new admission: the recorder looks it up again
            manager.requests[rid] = SimpleNamespace(prompt_len=trace.prompt_len(rid))
        at_once.record(_batch(items), manager, num_steps)
        for shift in range(num_steps):
            one_by_one.record(_batch(items, shift), manager)
    served = {request.id for request in trace}
    assert at_once.events(served) == one_by_one.events(served)
