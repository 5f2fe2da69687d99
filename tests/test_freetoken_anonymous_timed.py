"""FreeToken's timed runs on pools of anonymous page ids (``Engine.anonymous_manager``, switched by
``simulate.ANONYMOUS_IDS``) where nobody reads an id: the backend is one of the simulator's own (it reads each
batch's shape only), no observer is handed the event bus, and the bounds' ``EventRecorder`` reads positions and
requests only. As a property over the generated FreeToken runs (``test_freetoken_page_lists.page_cases``: SWA,
SWA + GDN and GDN models, the three presets, short windows, pages 1, 2, 16 and 64, bounds on and off, small
pools), timed: the tables, the summary, every allocation's pool and count, every tree's nodes as the run ends,
the pools' free counts and the eviction counts equal the reference's (the switch off: real ids). Fixed cases
(page 1 and 16, bounds on and off; one reaching FreeToken's free of a partly freed SWA run) hold floors on the anonymous ids handed out and the evictions. A backend
with memory of its own (the executor's mirrors the pools' ids), any backend not known to read no id, and an
``observe``d run keep real ids, and see them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from test_freetoken_anonymous_replay import FIXED_CASES, assert_anonymous_run_equal, run_logged
from test_freetoken_page_lists import page_cases

from sim.cache.components import Component
from sim.cache.events import SlotsFreed
from sim.cache.pools import ANONYMOUS_ID
from sim.run.backend import FixedStepBackend, PredictBackend, batch_shape, reads_page_ids
from sim.run.setup import build
from sim.run.simulate import SimConfig, cost_model, run_timed
from sim.trace.generate import fanout


@pytest.fixture(autouse=True)
def per_node_tree(monkeypatch):
    """Real ids make no run nodes (a listed free's order is a node's), so the anonymous side makes none either
    here, whose trees are compared node by node: tests/test_run_nodes_property.py holds the runs to them."""
    monkeypatch.setattr("sim.cache.tree_runs.RUN_NODES", False)


def _timed(case, bounds: bool, page: int | None = None, pool_tokens: int | None = None):
    trace, config = case[:2]
    config = replace(config, mode="timed", bounds=bounds)
    if page is not None:
        knobs = {**config.knobs, "page_size": page, "chunked_prefill_size": 2 * page}
        config = replace(config, knobs=knobs, pool_tokens=pool_tokens)
    return trace, config


# (trace, config, floors: anonymous ids handed out, FULL evictions, tombstones as the run ends); as in the
# replays, the SWA pool never evicts here
TIMED_CASES = [
    (*_timed(FIXED_CASES[0], False), (20_000, 40, 4)),
    (*_timed(FIXED_CASES[1], False), (40_000, 25, 3)),
    (*_timed(FIXED_CASES[2], False), (15_000, 40, 2)),
    (*_timed(FIXED_CASES[0], True), (20_000, 40, 4)),
    (*_timed(FIXED_CASES[2], True, page=16, pool_tokens=960), (1_000, 25, 2)),
    (  # SWA + GDN, a 128-token window: a snapshot's commit frees a run of SWA pages whose head was freed
        # already (``freetoken_frees.swa_live``'s mixed list: the only case here that reaches it)
        fanout(num_groups=2, prompts_per_group=5, system_len=600, question_len=50, output_len=80, seed=3),
        SimConfig(
            policy="freetoken",
            model="inkling",
            knobs=dict(page_size=1, chunked_prefill_size=64, window=128),
            pool_tokens=2_500,
            mamba_states=24,
            bounds=False,
            mode="timed",
        ),
        (14_000, 15, 2),
    ),
]


@pytest.mark.interpreted  # patches Pool.alloc and a module flag, which the compiled core binds
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases())
@example(case=TIMED_CASES[0][:2])
@example(case=TIMED_CASES[1][:2])
@example(case=TIMED_CASES[2][:2])
@example(case=TIMED_CASES[3][:2])
@example(case=TIMED_CASES[4][:2])
@example(case=TIMED_CASES[5][:2])
def test_the_anonymous_timed_run_equals_the_timed_run_on_real_ids(case, monkeypatch):
    trace, config = case
    assert_anonymous_run_equal(trace, replace(config, mode="timed"), monkeypatch)  # a refused config: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("trace, config, floors", TIMED_CASES)
def test_the_fixed_timed_runs_use_the_anonymous_pools_and_evict(trace, config, floors, monkeypatch):
    """The fixed examples' timed runs hand out anonymous ids by the thousand, evict (so that freed ids are
    handed out again) and leave tombstones."""
    log, ids = assert_anonymous_run_equal(trace, config, monkeypatch)
    num_ids, num_full_evictions, num_tombstones = floors
    assert len(ids) >= num_ids
    assert log[-1][2][Component.FULL] >= num_full_evictions
    assert sum(node[4] for node in log[-2]) >= num_tombstones


class MirroringBackend:
    """Like the executor's backend: mirrors the manager's pools (the ids freed) and reads every item's page
    tables at every step; times as the cost model predicts."""

    predicts_only = False

    def __init__(self, predict: PredictBackend):
        self.predict, self.ids_seen, self.ids_freed = predict, set(), []

    def attach(self, manager) -> None:
        manager.events.subscribe(SlotsFreed, lambda event: self.ids_freed.extend(event.ids))

    def run(self, batch, manager) -> float:
        for item in batch.items:
            full, swa = manager.page_tables(item.plan.request_id)
            self.ids_seen.update(full, (page for page in swa if page is not None))
        return self.predict.step_time(batch_shape(batch))


class OwnPredictBackend(PredictBackend):
    """A subclass of the simulator's own: it may read what it likes, so it is not taken to read no id."""


def _timed_runner(backend_of=None, observe=None):
    def run(trace, config):
        setup = build(config)
        backend = None if backend_of is None else backend_of(cost_model(config, setup.model))
        return run_timed(trace, setup, backend=backend, observe=observe)

    return run


@pytest.mark.interpreted
def test_the_simulators_own_backends_run_on_anonymous_ids(monkeypatch):
    trace, config, _ = TIMED_CASES[0]
    assert not reads_page_ids(FixedStepBackend(0.01)) and not reads_page_ids(PredictBackend(None))
    for runner in (_timed_runner(), _timed_runner(lambda cost: FixedStepBackend(0.01))):
        ids = run_logged(trace, config, True, monkeypatch, run=runner)[2]
        assert len(ids) > 10_000 and set(ids) == {ANONYMOUS_ID}


@pytest.mark.interpreted
def test_a_backend_with_memory_and_an_observed_run_keep_real_ids(monkeypatch):
    """The switch is on; still the ids handed out are real, distinct where live, and what the backend or the
    observer reads of them is real."""
    trace, config, _ = TIMED_CASES[0]
    mirroring: list = []
    freed: list = []

    def observe(bus):
        bus.subscribe(SlotsFreed, lambda event: freed.extend(event.ids))

    runners = (
        _timed_runner(lambda cost: mirroring.append(MirroringBackend(PredictBackend(cost))) or mirroring[-1]),
        _timed_runner(OwnPredictBackend),
        _timed_runner(observe=observe),
    )
    for runner in runners:
        ids = run_logged(trace, config, True, monkeypatch, run=runner)[2]
        assert len(ids) > 10_000 and ANONYMOUS_ID not in ids and len(set(ids)) > 1_000
    assert reads_page_ids(mirroring[0]) and reads_page_ids(OwnPredictBackend(None))
    seen, mirrored = mirroring[0].ids_seen, mirroring[0].ids_freed
    assert len(seen) > 1_000 and ANONYMOUS_ID not in seen
    for ids_freed in (mirrored, freed):
        assert len(set(ids_freed)) > 1_000 and ANONYMOUS_ID not in ids_freed
