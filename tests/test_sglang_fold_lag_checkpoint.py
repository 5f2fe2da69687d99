"""An SGLang batch run's idle fold (``sim/sched/sglang_folds.py``) taken further, both switches together: the one
idle step the overlap loop's lag leaves before a request's free fires (``FIRST_IDLE_STEP``) and, where no one
reads the steps' batches, a fold through the first decode checkpoint that moves no pool (``THROUGH_CHECKPOINT``).
As a property over the idle folds' generated sessions (SGLang's presets, pages 1/2/16/64, track and trigger
intervals of several sizes, both triggers, the overlap loop and the plain one, tight and loose pools, bounds on
and off) on real ids: every id each pool hands out and takes back, in order, every ``SwaFreed`` and
``CheckpointSaved`` (a listener in half the examples) and the tables are the reference's (both switches off).
The fixed bursts take both new folds, so the property is not met by never taking one.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_sglang_idle_folds_property import cases, growing_long_burst
from test_swa_free_runs import STRETCH_RUNS

import sim.run.simulate as simulate_module
from sim.cache.events import CheckpointSaved, SwaFreed
from sim.cache.pools import Pool
from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_folds, sglang_runs

POOL_ALLOC, POOL_FREE, MAKE_MANAGER = Pool.alloc, Pool.free, simulate_module.make_manager  # before any patch
TAKE_IDLE = sglang_runs.take_idle_event_steps


def run_logged(case, listened: bool, on: bool, monkeypatch) -> tuple[list, object, list[int]]:
    """The run (fast path on), every id each pool handed out and took back and every ``SwaFreed`` and
    ``CheckpointSaved`` (where listened), in order, and its folds: [one-step folds, folds taking a checkpoint]."""
    trace, policy, knobs, pool_tokens, bounds = case
    moved: dict[str, list] = {}
    told: list = []
    folds = [0, 0]

    def logged_alloc(pool, count):
        ids = POOL_ALLOC(pool, count)
        moved.setdefault(pool.name, []).extend(
            ("out", id) for id in ids
        )  # one id at a time: calls group them
        return ids

    def logged_free(pool, ids):
        moved.setdefault(pool.name, []).extend(("back", id) for id in ids)
        return POOL_FREE(pool, ids)

    def make_and_listen(model_spec, policy, sizes, events, **how):
        if listened:
            for kind in (SwaFreed, CheckpointSaved):
                events.subscribe(kind, lambda event: told.append(event))
        return MAKE_MANAGER(model_spec, policy, sizes, events, **how)

    def counted(manager, reqs, iteration, done, num_steps, announced):
        folds[0] += num_steps == 1
        folds[1] += bool(sglang_folds._checkpoint_steps(manager.rules, reqs, num_steps))
        return TAKE_IDLE(manager, reqs, iteration, done, num_steps, announced)

    monkeypatch.setattr(sglang_folds, "FIRST_IDLE_STEP", on)
    monkeypatch.setattr(sglang_folds, "THROUGH_CHECKPOINT", on)
    monkeypatch.setattr(simulate_module, "ANONYMOUS_IDS", False)  # real ids: they are compared
    monkeypatch.setattr(simulate_module, "make_manager", make_and_listen)
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(Pool, "free", logged_free)
    monkeypatch.setattr(sglang_runs, "take_idle_event_steps", counted)
    model = "qwen3-next" if policy == "radix" else "inkling"
    config = SimConfig(
        policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )
    result = simulate(trace, config, fast_path=True)
    return [moved, told], result, folds


def _burst(policy: str, page: int) -> tuple:
    """The idle folds' long burst on ``policy`` under the overlap loop, bounds off (so checkpoints fold)."""
    knobs = dict(page_size=page, overlap=True, chunked_prefill_size=max(page, 16) * 64, track_interval=128)
    return growing_long_burst(), policy, knobs, 14000, False


SGLANG_16, SGLANG_1, RETAIN_64 = _burst("sglang", 16), _burst("sglang", 1), _burst("sglang-retain", 64)


@pytest.mark.interpreted  # patches Pool.alloc and module flags, which the compiled core binds
@STRETCH_RUNS
@given(case=cases(), listened=st.booleans())
@example(case=SGLANG_16, listened=True)
@example(case=SGLANG_1, listened=False)
@example(case=RETAIN_64, listened=True)
def test_lag_and_checkpoint_folds_leave_pools_events_and_tables_as_the_reference(case, listened, monkeypatch):
    same_both_ways(lambda on: run_logged(case, listened, on, monkeypatch))


@pytest.mark.interpreted
@pytest.mark.parametrize("case", [SGLANG_16, SGLANG_1, RETAIN_64])
def test_the_fixed_bursts_take_both_folds(case, monkeypatch):
    _, _, on = run_logged(case, False, True, monkeypatch)
    _, _, off = run_logged(case, False, False, monkeypatch)
    assert on[0] > off[0] and on[1] > 0 and off[1] == 0, (on, off)
