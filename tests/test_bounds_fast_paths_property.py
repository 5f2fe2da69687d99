"""The bounds' two fast paths in a timed run leave the bounds' events and every output as the reference makes them:
``batch.LAZY_DECODE_BATCH`` (a batch run's page step keeps its lengths, and the recorder reads them, skipping the
tokens its open runs hold and looking nothing up) and ``simulate.BOUNDS_READ_RUN_SEQS`` (the trie reads the
request sequences the engine's records hold). As a property over generated timed runs (SGLang's loops, the
default loop, FreeToken's and Marconi's; pages 1 to 64; multi-turn and fan-out traces, open-loop follow-ups
whose outputs are quoted while they decode; tight pools, so requests are retracted and re-admitted): the
recorder's event log, the tables and the summary equal the run with both switches off. Fixed cases (the
``@example``s) hold floors on the fast paths' use, counted in the test's own runs only.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

import sim.run.simulate as simulate_module
from sim.bounds import recorder as recorder_module
from sim.bounds.recorder import EventRecorder
from sim.run.simulate import SimConfig, simulate
from sim.sched import batch as batch_module
from sim.sched import last_output, loop_runs
from sim.trace.generate import fanout, multiturn

pytestmark = pytest.mark.usefixtures("default_loop_no_cache")  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)

POLICIES = ["sglang-retain", "sglang", "radix", "no-cache", "freetoken", "marconi-sglang"]
MODELS = ["tiny", "tiny-swa", "qwen3-next", "inkling"]
# the originals, before any run of this test wraps them
EVENTS, DECODE_STEP = EventRecorder.events, EventRecorder._record_decode_step
RECORD, DECODE_RUN = EventRecorder.record, EventRecorder._record_decode_run
LAST_OUTPUT_STEP = last_output.take_last_output_step
SWITCHES = [
    (batch_module, "LAZY_DECODE_BATCH"),
    (simulate_module, "BOUNDS_READ_RUN_SEQS"),
    (loop_runs, "EVENT_BATCH_FROM_LENGTHS"),
    (recorder_module, "RUN_FROM_LENGTHS"),
    (last_output, "READ_BATCHES_THROUGH_LAST"),
    (recorder_module, "INLINE_RUN_EXTENSION"),
]
SUBMITTED = simulate_module._submitted_seqs


@pytest.fixture(autouse=True, scope="module")
def _event_steps_under_the_bounds():
    """The event steps' lengths batches are a subject here (``EVENT_BATCH_FROM_LENGTHS``, their floor): ``no-cache``'s
    stretches stop at each SWA free and checkpoint under the bounds, as before ``loop_runs.ANNOUNCED_FOLDS`` (held to
    this by ``tests/test_swa_free_runs_bounds.py``)."""
    with mock.patch.object(loop_runs, "ANNOUNCED_FOLDS", False):
        yield


def run_recorded(trace, config: SimConfig, fast: bool, monkeypatch) -> tuple:
    """The run with every switch ``fast`` (else all off): its event log and the batches the recorder was handed
    (each item read), tables, summary, and how many decode steps and runs the recorder read from lengths, how
    many event steps kept their lengths and how many sequences the trie was handed."""
    for module, switch in SWITCHES:
        monkeypatch.setattr(module, switch, fast)
    logs: list = []
    counts = {"decode_steps": 0, "seqs": 0, "decode_runs": 0, "event_steps": 0, "last_outputs": 0}

    def last_output_step(*args):
        step = LAST_OUTPUT_STEP(*args)
        counts["last_outputs"] += step is not None
        return step

    def recorded(recorder, batch, manager, num_steps=1):
        logs.append((batch.iteration, num_steps, [tuple(item.plan) for item in batch.items]))
        counts["event_steps"] += getattr(batch, "plans", None) is not None
        RECORD(recorder, batch, manager, num_steps)

    def run_counted(recorder, batch, num_steps):
        counts["decode_runs"] += 1
        DECODE_RUN(recorder, batch, num_steps)

    def logged(recorder, served):
        logs.append(EVENTS(recorder, served))
        return logs[-1]

    def counted(recorder, batch):
        counts["decode_steps"] += 1
        DECODE_STEP(recorder, batch)

    def seqs(engine):
        found = SUBMITTED(engine)
        counts["seqs"] += len(found)
        return found

    monkeypatch.setattr(EventRecorder, "events", logged)
    monkeypatch.setattr(EventRecorder, "record", recorded)
    monkeypatch.setattr(EventRecorder, "_record_decode_run", run_counted)
    monkeypatch.setattr(last_output, "take_last_output_step", last_output_step)
    monkeypatch.setattr(EventRecorder, "_record_decode_step", counted)
    monkeypatch.setattr(simulate_module, "_submitted_seqs", seqs)
    result = simulate(trace, config)
    return logs, result, counts


def assert_equal_runs(trace, config: SimConfig, monkeypatch) -> dict:
    (_, _, counts), (_, _, slow_counts) = same_both_ways(
        lambda fast: run_recorded(trace, config, fast, monkeypatch)
    )
    assert not any(slow_counts.values())  # the reference takes none
    return counts


def _turns(seed: int, num_sessions: int = 4, num_turns: int = 4, request_rate: float = 4.0):
    return multiturn(
        num_sessions=num_sessions, num_turns=num_turns, system_len=300, user_len=100, output_len=150,
        think_time=0.05, request_rate=request_rate, seed=seed,
    )  # fmt: skip


@st.composite
def timed_cases(draw):
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(page_size=page, chunked_prefill_size=page * draw(st.integers(2, 8)))
    seed = draw(st.integers(0, 50))
    if draw(st.booleans()):
        trace = _turns(
            seed, draw(st.integers(2, 5)), draw(st.integers(2, 4)), draw(st.sampled_from([2.0, 50.0]))
        )
    else:
        trace = fanout(
            num_groups=draw(st.integers(1, 3)), prompts_per_group=draw(st.integers(2, 5)), system_len=300,
            question_len=50, output_len=draw(st.integers(10, 150)), request_rate=20.0, seed=seed,
        )  # fmt: skip
    config = SimConfig(
        policy=draw(st.sampled_from(POLICIES)), model=draw(st.sampled_from(MODELS)), knobs=knobs,
        pool_tokens=draw(st.integers(800, 6_000)), mamba_states=draw(st.integers(4, 30)), bounds=True,
        mode="timed",
    )  # fmt: skip
    return trace, config


def _config(policy: str, page: int, pool_tokens: int = 4_000, model: str = "tiny-swa") -> SimConfig:
    knobs = dict(page_size=page, chunked_prefill_size=page * 4 if page > 1 else 64)
    return SimConfig(
        policy=policy,
        model=model,
        knobs=knobs,
        pool_tokens=pool_tokens,
        mamba_states=20,
        bounds=True,
        mode="timed",
    )


# (trace, config, floors: decode steps the recorder read from lengths, sequences handed to the trie, event steps that
# kept their lengths, runs of page steps read from their lengths, last outputs taken in batch runs)
FIXED_CASES = [
    (_turns(1, 6, 4), _config("sglang-retain", 16), (130, 24, 0, 0, 0)),
    (_turns(2, 6, 4), _config("radix", 2), (700, 24, 0, 0, 0)),
    (_turns(3, 6, 4, 50.0), _config("no-cache", 2, 2_000), (60, 24, 0, 0, 1)),
    (_turns(3, 6, 4), _config("freetoken", 16, 3_000), (100, 24, 0, 0, 0)),
    (_turns(4, 8, 4, 50.0), _config("freetoken", 1, 6_000, "inkling"), (0, 32, 6, 24, 0)),
    (_turns(4, 8, 4, 50.0), _config("no-cache", 16, 6_000, "inkling"), (200, 32, 60, 6, 15)),
]


@pytest.mark.interpreted  # patches module flags and methods the compiled core binds
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=timed_cases())
@example(case=FIXED_CASES[0][:2])
@example(case=FIXED_CASES[1][:2])
@example(case=FIXED_CASES[2][:2])
@example(case=FIXED_CASES[3][:2])
@example(case=FIXED_CASES[4][:2])
@example(case=FIXED_CASES[5][:2])
def test_the_bounds_fast_paths_equal_the_reference(case, monkeypatch):
    trace, config = case
    assert_equal_runs(trace, config, monkeypatch)  # a configuration a preset refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("trace, config, floors", FIXED_CASES)
def test_the_fixed_runs_take_the_fast_paths(trace, config, floors, monkeypatch):
    counts = assert_equal_runs(trace, config, monkeypatch)
    assert counts["decode_steps"] >= floors[0]
    assert counts["seqs"] >= floors[1]
    assert counts["event_steps"] >= floors[2]
    assert counts["decode_runs"] >= floors[3]
    assert counts["last_outputs"] >= floors[4]
