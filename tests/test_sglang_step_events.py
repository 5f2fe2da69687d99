"""The step events of the SGLang loop's fast path (``sim/sched/sglang_fast.py``) keep the contract of
``sim/cache/events.py``: every step of the table is announced exactly once, by a ``StepStarted`` (alone, or
one of its ``num_steps``) or among a ``PlainStepsEnded``'s steps; each announced batch is the batch the
step-by-step loop launched at that step, each ``StepEnded`` its row and pools, and each step told by a
``StepStarted`` is ended by a ``StepEnded`` (an observer pairing them, as the conformance recorder does,
reads the loop's steps). The cache's ``Admitted`` and ``Finished`` come in the loop's order. Generated sessions
of ``test_sglang_finishing_runs`` (their runs end requests and process their finishes), bounds on and off."""

from __future__ import annotations

from hypothesis import given, settings

from sim.cache.events import Admitted, EventBus, Finished, PlainStepsEnded, StepEnded, StepStarted
from sim.run.setup import build
from sim.run.simulate import SimConfig, run_timed
from tests.test_sglang_finishing_runs import cases


class StepEvents:
    """A run's step events by step: the batch each ``StepStarted`` told (a run of ``num_steps`` shifted a
    token a step), each ``StepEnded``'s row and pools, the steps told as plain, the cache's finishes."""

    def __init__(self, events: EventBus) -> None:
        self.batches: dict[int, tuple] = {}
        self.ended: dict[int, tuple] = {}
        self.plain: list[int] = []
        self.num_told = 0  # announcements, step by step: each step once
        self.unpaired: list[int] = []  # StepEnded with no StepStarted told for its step before it
        self.cache: list[tuple] = []
        events.subscribe(StepStarted, self._started)
        events.subscribe(StepEnded, self._ended)
        events.subscribe(PlainStepsEnded, self._plain)
        events.subscribe(Admitted, lambda event: self.cache.append(("admitted", event.request_id)))
        events.subscribe(
            Finished, lambda event: self.cache.append(("finished", event.request_id, event.inserted_len))
        )

    def _started(self, event: StepStarted) -> None:
        for shift in range(event.num_steps):
            items = event.batch.items
            step = tuple(
                (i.plan.request_id, i.plan.start + shift, i.plan.end + shift, i.is_prefill) for i in items
            )
            self.batches[event.batch.iteration + shift] = step
            self.num_told += 1

    def _ended(self, event: StepEnded) -> None:
        iteration = event.step[0]
        if iteration not in self.batches:
            self.unpaired.append(iteration)
        self.ended[iteration] = (event.step, event.pools)

    def _plain(self, event: PlainStepsEnded) -> None:
        self.plain += range(event.first_step, event.first_step + len(event.starts))
        self.num_told += len(event.starts)


def watched_run(config: SimConfig, trace, fast_path: bool):
    watchers: list[StepEvents] = []
    result = run_timed(
        trace, build(config), fast_path=fast_path, observe=lambda bus: watchers.append(StepEvents(bus))
    )
    return result, watchers[0]


TOTALS = {"runs": 0, "plain": 0, "told": 0}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(cases())
def test_fast_step_events_are_the_loops(case):
    trace, policy, knobs, pool_tokens, bounds = case
    model = "qwen3-next" if policy == "radix" else "inkling"
    config = SimConfig(
        policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )
    fast_result, fast = watched_run(config, trace, True)
    slow_result, slow = watched_run(config, trace, False)
    assert fast_result.steps.equals(slow_result.steps)
    num_steps = len(slow_result.steps)
    assert sorted(slow.batches) == list(range(num_steps)) and not slow.plain
    assert fast.num_told == num_steps  # each step once
    assert sorted([*fast.batches, *fast.plain]) == list(range(num_steps))
    for iteration, batch in fast.batches.items():
        assert batch == slow.batches[iteration], iteration
    assert sorted(fast.ended) == sorted(fast.batches) and not fast.unpaired
    for iteration, row in fast.ended.items():
        assert row == slow.ended[iteration], iteration
    assert fast.cache == slow.cache
    TOTALS["runs"] += 1
    TOTALS["plain"] += len(fast.plain)
    TOTALS["told"] += len(fast.batches)


# the property runs once, inside the test below (which also asserts what its examples reach): collected
# on its own too, it ran its examples twice wherever pytest-xdist put the two tests on different workers
test_fast_step_events_are_the_loops.__test__ = False


def test_the_generated_runs_tell_steps_both_ways():
    test_fast_step_events_are_the_loops()
    assert TOTALS["plain"] > 1000 and TOTALS["told"] > 1000, TOTALS
