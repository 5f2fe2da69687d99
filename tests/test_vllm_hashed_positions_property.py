"""A SWA window's frees split into hashed and unhashed blocks by the blocks' table positions
(``sim/cache/blocks/hashed_positions.py``, switch ``BY_POSITION``) split as the reference does, reading each
block's key (``by_id.split_set``): every split of a run is checked against the reference's on the same blocks
as the run goes, and the whole runs with the switch on and off are held equal (request and step tables, summary).

Generated traces and configs are the private-blocks property's: fan-outs, multi-turn chats and mixed prompts;
models with SWA, Mamba or both and several block sizes, retention intervals None / 0 / a block / three blocks
(SWA tails kept at boundaries and periods), async scheduling, pools from a few dozen blocks (evictions,
refusals, preemptions in timed mode) to roomy; replay and timed. Floors on fixed cases: splits with hashed and
unhashed blocks both, hit blocks among them, retention tails among them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_vllm_private_blocks_property import build, config_of, configs, traces

from sim.cache.blocks import by_id, hashed_positions, steps
from sim.cache.knobs import NONE
from sim.models import SWA
from sim.run.simulate import simulate


def checked_run(trace_spec, config_spec, on: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; with it on, each window release's split by position is compared with the
    reference's on the same blocks before it frees them (``seen`` counts the splits, those with both parts,
    and those reaching a hit's slots)."""
    monkeypatch.setattr(hashed_positions, "BY_POSITION", on)
    # the live run's search goes on past its first stretch
    monkeypatch.setattr(hashed_positions, "FIRST_SPAN", 2)
    release_window = steps.release_window

    def compared(layout, pool, table, group, processed, extra=0, positions=None, req=None):
        top = min(len(table) - 1, steps.window_top(layout, processed, extra))
        if positions is not None and top >= 0 and table[top] is not None:
            below = table[top::-1]
            lo = top + 1 - by_id.first_none(below)
            live = hashed_positions.live_below(table, top)
            assert live == below[: top + 1 - lo], (req.request_id, group, lo)
            answer = positions.split(req, group, top + 1, live)
            assert answer == by_id.split_set(pool.key_at, live), (req.request_id, group, lo)
            seen["splits"] = seen.get("splits", 0) + 1
            seen["both"] = seen.get("both", 0) + bool(answer[0] and answer[1])
            seen["hit"] = seen.get("hit", 0) + bool(answer[0] and lo < req.hit.tokens // layout.block_of(SWA))
        release_window(layout, pool, table, group, processed, extra, positions, req)

    monkeypatch.setattr(steps, "release_window", compared)
    result = simulate(build(trace_spec), config_of(config_spec))
    monkeypatch.setattr(steps, "release_window", release_window)
    return (), result


@st.composite
def configs_dense_too(draw):
    """The private-blocks property's configs, a retention "not given" (the preset's 0) made ``none`` half the
    time: SWA's mask dense, every block hashed (vLLM before #52216), not the boundaries' tails alone."""
    mode, model, knobs, pool_tokens = draw(configs())
    if knobs["retention_interval"] is None and draw(st.booleans()):
        knobs = {**knobs, "retention_interval": NONE}
    return mode, model, knobs, pool_tokens


def same_runs(trace_spec, config_spec, monkeypatch) -> dict:
    """Both runs, held equal; what the switch-on run's checks counted."""
    seen: dict = {}
    try:
        same_both_ways(lambda on: checked_run(trace_spec, config_spec, on, monkeypatch, seen))
    except ValueError:  # the pool cannot hold one max_model_len request (both runs refuse alike)
        pytest.skip("refused")
    return seen


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(trace_spec=("multiturn", (3, 4, 200, 48, 60, 0)), config_spec=("replay", "tiny-swa", {}, 20000))
@example(
    trace_spec=("fanout", (2, 8, 300, 60, 200)),
    config_spec=("timed", "tiny-swa", {"async_scheduling": True, "retention_interval": 176}, 2000),
)
@given(trace_spec=traces, config_spec=configs_dense_too())
def test_splits_by_position_split_as_the_reference(trace_spec, config_spec, monkeypatch):
    same_runs(trace_spec, config_spec, monkeypatch)


# a chat on tiny-swa: each turn's hit reaches its SWA window tail (hit blocks freed), the prompt's last boundary
# kept hashed under retention 0 among the unhashed; retention 176 keeps a tail each segment
FLOORS = (
    (("multiturn", (3, 4, 200, 48, 60, 0)), ("replay", "tiny-swa", {"retention_interval": 0}, 20000)),
    (("multiturn", (3, 4, 200, 48, 60, 0)), ("timed", "tiny-swa", {"retention_interval": 176}, 20000)),
    (("fanout", (2, 6, 1500, 300, 100)), ("replay", "gemma-4-26b-a4b", {}, 200000)),
)


@pytest.mark.parametrize("case", range(len(FLOORS)))
def test_the_fixed_cases_split_hashed_and_unhashed_blocks(case, monkeypatch):
    seen = same_runs(*FLOORS[case], monkeypatch)
    assert seen["splits"] >= 5 and seen["both"] >= 1 and seen["hit"] >= 1, seen


def test_a_dense_mask_splits_every_block_hashed(monkeypatch):
    """Retention ``none`` (SWA's mask dense): each window's release all hashed, the hit's slots among them."""
    chat = ("multiturn", (3, 4, 200, 48, 60, 0))
    seen = same_runs(chat, ("replay", "tiny", {"retention_interval": NONE}, 20000), monkeypatch)
    assert seen["splits"] >= 5 and seen["hit"] >= 1, seen
