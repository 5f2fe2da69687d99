"""A hit's scans read a stretch of keys at a time (``sim/cache/blocks/window_scan.py``, switch ``WINDOW_SCAN``) and
its FULL tables taken from the blocks its answer read (``admission.READ_ONCE``), against the references (a key and
a group at a time; each table looked up again): the SWA answer, the why watcher's blocked ranges, the hit and its
tables over drawn maps (SWA blocks smaller than the scheduler's, keys a stride apart, windows wider than the
chain, holes anywhere, several groups listing different keys); whole runs with both switches on and off held
equal on the private-blocks property's generated traces and configs, with floors on fixed cases that each fast
path is taken."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_vllm_private_blocks_property import build, config_of, configs, traces

from sim.cache.blocks import admission, hit, misses, window_scan
from sim.cache.blocks.admission import hit_tables
from sim.cache.blocks.cache_map import CacheMap
from sim.cache.blocks.layout import Layout
from sim.cache.events import EventBus
from sim.models import FULL, MAMBA, SWA
from sim.run.simulate import simulate


@st.composite
def maps(draw) -> tuple[Layout, CacheMap, list[int]]:
    """A layout of SWA, FULL and Mamba groups (one or two FULL groups; SWA blocks of ``hash * swa_step`` tokens, the scheduler's a
    multiple of them) and a map listing each (key, group) drawn, mostly listed."""
    hash_block, swa_step = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    swa_block = hash_block * swa_step
    block = swa_block * draw(st.sampled_from([1, 1, 2, 3]))
    kinds = (
        (SWA,) * draw(st.integers(1, 3))
        + (FULL,) * draw(st.integers(1, 2))
        + (MAMBA,) * draw(st.integers(1, 2))
    )
    mamba_block = draw(st.sampled_from([hash_block, block]))  # the scheduler's: the watcher's fast path
    layout = Layout(block, kinds, 1, draw(st.integers(1, 60)), 0, ((SWA, swa_block), (MAMBA, mamba_block)))
    chain = list(range(1000, 1000 + draw(st.integers(0, 120))))
    pool = CacheMap(1 + len(chain) * len(kinds), len(kinds))
    odds = draw(st.sampled_from([0.3, 0.5, 0.9, 1.0]))
    listed = draw(
        st.lists(st.floats(0, 1), min_size=len(chain) * len(kinds), max_size=len(chain) * len(kinds))
    )
    for at, chance in enumerate(listed):
        if chance < odds:
            pool.cache_in(1 + at, chain[at // len(kinds)], at % len(kinds))
    return layout, pool, chain


def both(monkeypatch, call):
    """``call()`` with both switches on, then off."""
    answers = []
    for on in (True, False):
        monkeypatch.setattr(window_scan, "WINDOW_SCAN", on)
        monkeypatch.setattr(admission, "READ_ONCE", on)
        answers.append(call())
    return answers


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=maps(), top=st.integers(0, 140))
def test_swa_answer_as_the_reference(drawn, top, monkeypatch):
    layout, pool, chain = drawn
    on, off = both(monkeypatch, lambda: hit.answer(layout, pool, chain, SWA, top * layout.block_of(SWA)))
    assert on == off


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=maps(), bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)), offset=st.integers(0, 2))
def test_blocked_ranges_as_the_reference(drawn, bounds, offset, monkeypatch):
    layout, pool, chain = drawn
    cached = min(bounds) * layout.block_size + offset * (layout.block_size > 1)
    full = max(bounds) * layout.block_size
    watcher = misses.BlockMissTracker(layout, pool, EventBus())  # type: ignore[arg-type]

    def blocked():
        try:
            return watcher._blocked(chain, cached, full)
        except IndexError:  # a point past the chain: both read it alike
            return "IndexError"

    on, off = both(monkeypatch, blocked)
    assert on == off


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=maps(), prompt_len=st.integers(1, 400))
def test_hit_and_tables_as_the_reference(drawn, prompt_len, monkeypatch):
    layout, pool, chain = drawn

    def hit_and_tables():
        runs: dict | None = {} if admission.READ_ONCE else None
        found = hit.longest_hit(layout, pool, chain, prompt_len, False, runs)  # type: ignore[arg-type]
        return found, hit_tables(layout, pool, chain, found.tokens, False, runs)  # type: ignore[arg-type]

    on, off = both(monkeypatch, hit_and_tables)
    assert on == off


def counted_run(trace_spec, config_spec, on: bool, monkeypatch, seen: dict) -> tuple:
    """The run with both switches set; with them on, each fast path's calls counted (``seen``)."""
    monkeypatch.setattr(window_scan, "WINDOW_SCAN", on)
    monkeypatch.setattr(admission, "READ_ONCE", on)
    originals = {"swa_answer": window_scan.swa_answer, "cached_flags": window_scan.cached_flags}

    def swa_answer(*args):
        seen["swa scans"] += 1
        return originals["swa_answer"](*args)

    def cached_flags(*args):
        seen["stretches"] += 1
        return originals["cached_flags"](*args)

    def cached_run(self, keys, group):
        seen["full runs"] += 1
        return run_of(self, keys, group)

    run_of = CacheMap.cached_run
    monkeypatch.setattr(CacheMap, "cached_run", cached_run)
    monkeypatch.setattr(window_scan, "swa_answer", swa_answer)
    monkeypatch.setattr(window_scan, "cached_flags", cached_flags)
    result = simulate(build(trace_spec), config_of(config_spec))
    for name, original in originals.items():
        monkeypatch.setattr(window_scan, name, original)
    monkeypatch.setattr(CacheMap, "cached_run", run_of)
    return (), result


def same_runs(trace_spec, config_spec, monkeypatch) -> dict:
    """Both runs, held equal; what the switch-on run's fast paths counted."""
    seen = {"swa scans": 0, "stretches": 0, "full runs": 0}
    try:
        same_both_ways(lambda on: counted_run(trace_spec, config_spec, on, monkeypatch, seen))
    except ValueError:  # the pool cannot hold one max_model_len request (both runs refuse alike)
        pytest.skip("refused")
    return seen


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace_spec=traces, config_spec=configs())
def test_runs_with_stretch_reads_equal_the_reference(trace_spec, config_spec, monkeypatch):
    same_runs(trace_spec, config_spec, monkeypatch)


# a chat on a model with SWA and Mamba groups, replay and timed: SWA scans, and the watcher's deepest states (a
# stretch read that is no SWA scan's); a fan-out on a roomy pool: SWA scans alone
FLOORS = (
    (("multiturn", (3, 4, 200, 48, 60, 0)), ("replay", "tiny", {}, 20000), True),
    (("multiturn", (3, 4, 200, 48, 60, 0)), ("timed", "tiny", {"async_scheduling": True}, 20000), True),
    (("fanout", (2, 6, 1500, 300, 100)), ("replay", "inkling", {}, 200000), False),
)


@pytest.mark.parametrize("case", range(len(FLOORS)))
def test_the_fixed_cases_take_each_fast_path(case, monkeypatch):
    trace_spec, config_spec, watched = FLOORS[case]
    seen = same_runs(trace_spec, config_spec, monkeypatch)
    assert seen["swa scans"] >= 1 and seen["full runs"] >= 1, seen
    assert seen["stretches"] > seen["swa scans"] or not watched, seen
