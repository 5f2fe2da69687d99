"""The SimPy engine and scheduler: exact simulated times on hand-checked cases, closed-loop order,
determinism, occupancy accounting against check_integrity()."""
from __future__ import annotations

import json

import pytest

from sim.run.backend import FixedStepBackend
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace
from sim.trace.generate import fanout, multiturn

SMALL_POOLS = dict(pool_tokens=200_000, mamba_states=256)


def trace_of(*requests: Request) -> Trace:
    return Trace(list(requests))


def req(rid, prompt_len, output_len, arrival=None, after=None, think=0.0, prompt=None):
    return Request(id=rid, arrival=arrival, after=after, think_time=think, output_len=output_len,
                   prompt=prompt or [Segment(ref=rid, len=prompt_len)])


def run(trace, policy="sglang-retain", step_s=0.01, per_token_s=0.0, **knobs):
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16, track_interval=32, **knobs),
                       **SMALL_POOLS)
    return simulate(trace, config, backend=FixedStepBackend(step_s, per_token_s))


def test_single_request_times_are_exact():
    # 100-token prompt in one step, then 4 decode steps for 5 output tokens: 5 steps of 10 ms
    result = run(trace_of(req("a", 100, 5, arrival=1.0)))
    row = result.requests.iloc[0]
    assert row["arrival_at"] == 1.0
    assert row["first_token_at"] == pytest.approx(1.01)
    assert row["finished_at"] == pytest.approx(1.05)
    assert row["tpot_s"] == pytest.approx(0.01)
    assert len(result.steps) == 5


def test_chunked_prefill_takes_one_step_per_chunk():
    result = run(trace_of(req("a", 100, 1, arrival=0.0)), chunked_prefill_size=32)
    # chunks 32, 32, 32, 4 (non-final chunks end on a 16-token page)
    assert list(result.steps["prefill_tokens"]) == [32, 32, 32, 4]
    assert result.requests.iloc[0]["finished_at"] == pytest.approx(0.04)


def test_budget_is_shared_and_time_depends_on_tokens():
    result = run(trace_of(req("a", 40, 3, arrival=0.0), req("b", 40, 3, arrival=0.0)), per_token_s=0.001,
                 chunked_prefill_size=64)
    steps = result.steps
    # step 0: a's 40 tokens, then b gets 24 of the 64-token budget, cut to its 16-token page
    assert list(steps["prefill_tokens"][:2]) == [56, 24]
    assert steps.iloc[0]["duration_s"] == pytest.approx(0.01 + 0.056)
    assert result.summary["makespan_s"] == pytest.approx(steps["duration_s"].sum())


def test_idle_engine_sleeps_until_the_next_arrival():
    result = run(trace_of(req("a", 16, 1, arrival=0.0), req("b", 16, 1, arrival=5.0)))
    assert list(result.steps["start_at"]) == [0.0, 5.0]


def test_closed_loop_session_order_and_think_time():
    first = req("t1", 256, 4, arrival=0.0)
    second = req("t2", 0, 2, after="t1", think=2.0,
                 prompt=[Segment(ref="t1", len=256), Segment(output_of="t1"), Segment(ref="u2", len=8)])
    result = run(trace_of(first, second))
    rows = result.requests.set_index("id")
    assert rows.loc["t2", "arrival_at"] == pytest.approx(rows.loc["t1", "finished_at"] + 2.0)
    assert rows.loc["t2", "followup"] and rows.loc["t2", "previous_prompt_tokens"] == 256
    # inkling's checkpoint grid is 128: the prefill checkpoint sits at 256; 3 decode tokens reach no
    # 32-token decode checkpoint, so the decode region (256..259) is not reusable
    assert rows.loc["t2", "cached_tokens"] == 256 and not rows.loc["t2", "decode_region_hit"]


def test_same_inputs_give_identical_tables():
    trace = multiturn(num_sessions=4, num_turns=3, system_len=256, user_len=32, output_len=64, seed=3)
    a, b = run(trace, policy="sglang"), run(trace, policy="sglang")
    assert a.requests.to_csv() == b.requests.to_csv()
    assert a.steps.to_csv() == b.steps.to_csv()
    assert json.dumps(a.summary.as_dict()) == json.dumps(b.summary.as_dict())


@pytest.mark.interpreted  # patches Engine._record_step: the compiled engine takes no patch
@pytest.mark.parametrize("policy", ["sglang", "sglang-retain", "freetoken", "freetoken-lazy", "no-cache", "radix"])
def test_occupancy_rows_match_integrity_under_pressure(policy, monkeypatch):
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: check_integrity reads them
    trace = fanout(num_groups=3, prompts_per_group=6, system_len=256, question_len=32, output_len=48, seed=1)
    checks = []
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16, track_interval=32),
                       pool_tokens=2048, swa_pool_tokens=1024, mamba_states=24)
    from sim.run import simulate as simulate_module

    original = simulate_module.Engine._record_step

    def checked(engine, batch, started_at, duration, counts=None):
        engine.manager.check_integrity()
        usage = engine.manager.usage()
        checks.append(sum(u.free + u.running + u.tree for u in usage.values()))
        original(engine, batch, started_at, duration, counts)

    simulate_module.Engine._record_step = checked
    try:
        result = simulate(trace, config, backend=FixedStepBackend(0.01))
    finally:
        simulate_module.Engine._record_step = original
    steps = result.steps
    pools = [("full", 2048 // 16), ("swa", None), ("state", None)]
    total = steps["full_free"] + steps["full_running"] + steps["full_tree"]
    assert (total == pools[0][1]).all()
    assert len(set(checks)) == 1
    assert result.summary["rejected_requests"] == 0
    assert result.requests["finished_at"].notna().all()


def test_request_that_can_never_fit_is_rejected_not_crashed():
    config = SimConfig(policy="sglang", model="inkling", knobs=dict(page_size=16, track_interval=32),
                       pool_tokens=256, mamba_states=8)
    result = simulate(trace_of(req("big", 1000, 4, arrival=0.0), req("ok", 64, 4, arrival=0.0)), config,
                      backend=FixedStepBackend(0.01))
    rows = result.requests.set_index("id")
    assert "FULL pages" in rows.loc["big", "rejected"]
    assert rows.loc["ok", "rejected"] == "" and rows.loc["ok", "finished_at"] > 0


def test_running_requests_are_capped_by_a_third_of_the_mamba_pool():
    trace = fanout(num_groups=2, prompts_per_group=8, system_len=256, question_len=32, output_len=40, seed=4)
    config = SimConfig(policy="sglang-retain", model="inkling", knobs=dict(page_size=16, track_interval=32),
                       pool_tokens=200_000, mamba_states=12)
    result = simulate(trace, config, backend=FixedStepBackend(0.01))
    running = result.steps["num_decode"] + result.steps["num_prefill"]
    assert running.max() <= 4 and result.summary["retractions"] == 0
    assert result.summary["rejected_requests"] == 0


def test_a_request_that_can_never_fit_alone_is_rejected_not_retried_forever():
    # chunks of 16 tokens are below the 128-token checkpoint grid, so no prefill chunk takes a checkpoint,
    # nothing is inserted and no SWA is freed: the 3000-token prompt needs 188 SWA pages, the pool has 100
    config = SimConfig(policy="sglang-retain", model="inkling", mode="timed",
                       knobs=dict(page_size=16, track_interval=128, chunked_prefill_size=16),
                       pool_tokens=200_000, swa_pool_tokens=1600, mamba_states=16)
    from sim.cache.sizing import PoolSizes
    from sim.engines.registry import make_policy
    from sim.models import get_model
    from sim.run.setup import RunSetup
    from sim.run.simulate import run_timed

    model = get_model("inkling")
    setup = RunSetup(config, model, make_policy("sglang-retain", **config.knobs), PoolSizes(12500, 100, 16))
    result = run_timed(trace_of(req("long", 3000, 4, arrival=0.0), req("short", 100, 4, arrival=0.0)), setup,
                       backend=FixedStepBackend(0.01, 0.0))
    rows = result.requests.set_index("id")
    # SGLang's available_chunk_tokens gives the next chunk nothing once the SWA pool is spent: SGLang would
    # wait forever with the chunked request alone; simulate gives up on it
    assert rows.loc["long", "rejected"].startswith("stalled mid prefill: no prefill chunk fits at position 1584")
    assert rows.loc["short", "rejected"] == "" and rows.loc["short", "finished_at"] > 0
