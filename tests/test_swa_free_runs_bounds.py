"""``no-cache``'s freeing stretches with the bounds on (``sim/sched/freeing_runs.py``, ``loop_runs.ANNOUNCED_FOLDS``):
where only the bounds' recorder (a batch reader) listens to ``StepStarted``, a batch run's stretches take its SWA
frees and checkpoints, and the recorder is handed the same batches (iteration, steps, each item's request, tokens
and state), in the same order, as with the switch off (the reference: any listener stops a stretch at each free
and checkpoint, which the loop takes as an event step); its event log, the tables and the summary are equal. Over
generated ``no-cache`` bursts: models with MAMBA and SWA, SWA alone, MAMBA alone; pages 1, 2, 16, 64; the trigger
by tokens and by iterations; track intervals; small pools, so stretches stop for room and the loop evicts and
retracts around them. The fixed bursts hold floors (due steps announced, page runs joined over a room cut).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_swa_free_runs import STRETCH_RUNS

from sim.bounds.recorder import EventRecorder
from sim.run.simulate import SimConfig, simulate
from sim.sched import freeing_runs, loop_runs
from sim.trace import Request, Segment, Trace
from tests.fast_slow_helpers import growing_burst, nocache_burst

pytestmark = pytest.mark.usefixtures("default_loop_no_cache")  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)

RECORD, EVENTS = EventRecorder.record, EventRecorder.events  # the originals, before a run wraps them
STEP_RUNS, JOIN = freeing_runs.step_runs, loop_runs.join_step_runs
REACHED: Counter = Counter()  # what the announced freeing stretches took, over the fixed bursts


@st.composite
def bursts(draw):
    """Requests arriving close together, the model, the knobs of a ``no-cache`` run and its pool."""
    return nocache_burst(draw, [1, 2, 16, 64])


def run_recorded(burst, on: bool, monkeypatch) -> tuple[list, object]:
    """The run with ``ANNOUNCED_FOLDS`` ``on``: the batches the recorder was handed (each item read) and its event
    log, then the result; the due steps announced and the page runs joined at a seam counted (switch on only)."""
    trace, model, knobs, pool_tokens = burst
    logs: list = []

    def recorded(recorder, batch, manager, num_steps=1):
        items = [
            tuple(item.plan)[:4] for item in batch.items
        ]  # a plan's checkpoints: not read from a lengths batch
        logs.append((batch.iteration, num_steps, items))
        RECORD(recorder, batch, manager, num_steps)

    def logged(recorder, served):
        logs.append(EVENTS(recorder, served))
        return logs[-1]

    def counted(page_steps, freed, done, breaks_at, extends_break):
        REACHED["due steps"] += 0 if extends_break else len(breaks_at)  # the announced stretches' breaks
        return STEP_RUNS(page_steps, freed, done, breaks_at, extends_break)

    def joined(full_steps, stretch_steps, told):
        before = len(full_steps) + len(stretch_steps)
        JOIN(full_steps, stretch_steps, told)
        REACHED["joined"] += len(full_steps) < before

    monkeypatch.setattr(loop_runs, "ANNOUNCED_FOLDS", on)
    monkeypatch.setattr(EventRecorder, "record", recorded)
    monkeypatch.setattr(EventRecorder, "events", logged)
    monkeypatch.setattr(freeing_runs, "step_runs", counted)
    monkeypatch.setattr(loop_runs, "join_step_runs", joined)
    config = SimConfig(policy="no-cache", model=model, knobs=knobs, pool_tokens=pool_tokens, bounds=True)
    return logs, simulate(trace, config, fast_path=True)


def drawn_burst(drawn: list[tuple[int, int, int]]) -> Trace:
    """A burst as ``bursts`` draws it: (arrival in ms, output length, prompt length) a request."""
    return Trace(
        sorted(
            (
                Request(
                    id=f"r{index}",
                    arrival=at / 1000,
                    output_len=output_len,
                    prompt=[Segment(f"r{index}", length)],
                )
                for index, (at, output_len, length) in enumerate(drawn)
            ),
            key=lambda r: r.arrival,
        )
    )


# a stretch cut by room after frees, the next one going on from the same step with a page run over the seam
ROOM_CUT = (
    drawn_burst(
        [
            (224, 594, 87),
            (15, 644, 2481),
            (124, 857, 1067),
            (105, 179, 1167),
            (75, 557, 822),
            (139, 320, 2400),
        ]
        + [(387, 258, 1829), (86, 560, 1463), (251, 432, 499), (393, 215, 2337), (196, 211, 1164)]
    ),
    "small",
    dict(
        page_size=1,
        max_running_requests=2,
        track_interval=48,
        swa_eviction_interval=32,
        chunked_prefill_size=400,
    ),
    3000,
)
# fixed bursts: inkling at page 64 (tokens), small at page 16 (iterations), inkling at page 2 in a small pool,
# qwen3-next (MAMBA alone), the room cut
FIXED = [
    (Trace(growing_burst(8)), "inkling", dict(page_size=64, track_interval=128), 12000),
    (
        Trace(growing_burst(10)),
        "small",
        dict(page_size=16, track_interval=64, swa_free_trigger="iterations", swa_eviction_interval=32),
        9000,
    ),
    (
        Trace(growing_burst(8)),
        "inkling",
        dict(page_size=2, track_interval=128, swa_eviction_interval=7),
        6000,
    ),
    (Trace(growing_burst(8)), "qwen3-next", dict(page_size=64, track_interval=128), 12000),
    ROOM_CUT,
]


@pytest.mark.interpreted  # patches module flags and methods the compiled core binds
@STRETCH_RUNS
@given(burst=bursts())
@example(burst=ROOM_CUT)
def test_announced_freeing_stretches_tell_the_bounds_what_full_steps_do(burst, monkeypatch):
    same_both_ways(lambda on: run_recorded(burst, on, monkeypatch))


@pytest.mark.interpreted
def test_fixed_bursts_reach_the_announced_folds_floors(monkeypatch):
    REACHED.clear()
    for burst in FIXED:
        same_both_ways(lambda on, burst=burst: run_recorded(burst, on, monkeypatch))
    assert REACHED["due steps"] > 40, REACHED
    assert REACHED["joined"] > 0, REACHED
