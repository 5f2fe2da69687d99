"""A SWA or Mamba table's nulls counted, not filtered (``sim/cache/blocks/null_runs.py``, switch ``COUNTED``),
against the reference's filter a slot: each of its three functions with the switch on and off over tables drawn
null-heavy (a Mamba chunk's nulls before its state, a SWA table's nulls below its window, holes anywhere), and
whole runs with the switch on and off held equal (request and step tables, summary) on the private-blocks
property's generated traces and configs, with floors on fixed cases that each fast path is taken."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_vllm_private_blocks_property import build, config_of, configs, traces

from sim.cache.blocks import null_runs, steps
from sim.run.simulate import simulate


@st.composite
def tables(draw) -> list[int | None]:
    """A table of distinct block ids and nulls: nulls then held blocks (the usual shapes), or any pattern."""
    num_null, num_held = draw(st.integers(0, 30)), draw(st.integers(0, 6))
    if draw(st.booleans()):
        slots = [None] * num_null + [True] * num_held
    else:
        slots = draw(st.lists(st.sampled_from([None, None, True]), max_size=36))
    ids = iter(range(1, len(slots) + 1))
    return [next(ids) if held else None for held in slots]


def both(monkeypatch, call):
    """``call()`` with the switch on, then off."""
    monkeypatch.setattr(null_runs, "COUNTED", True)
    on = call()
    monkeypatch.setattr(null_runs, "COUNTED", False)
    return on, call()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables(), bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)), state_alone=st.booleans())
def test_states_below_frees_and_nulls_as_the_reference(table, bounds, state_alone, monkeypatch):
    retired, last = min(bounds), min(max(bounds), len(table))
    if state_alone and retired < last:  # the usual: the state at ``retired`` alone held in the range
        table[retired:last] = [1000] + [None] * (last - retired - 1)
    tables_after = [list(table), list(table)]
    on, off = both(
        monkeypatch, lambda: null_runs.states_below(tables_after[null_runs.COUNTED], retired, last)
    )
    assert on == off
    assert tables_after[1] == tables_after[0]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables(), has_nulls=st.booleans())
def test_held_tail_first_gives_the_pool_the_reference_s_blocks(table, has_nulls, monkeypatch):
    on, off = both(monkeypatch, lambda: list(null_runs.held_tail_first(table, has_nulls)))
    assert list(filter(None, on)) == list(filter(None, off))  # what ``free_blocks`` reads of it


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    table=tables(),
    spans=st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(-1, 40)),
    stride=st.integers(1, 3),
    num_keys=st.integers(0, 130),
    kept=st.lists(st.integers(0, 40), max_size=4),
)
def test_unhashed_keys_as_the_reference(table, spans, stride, num_keys, kept, monkeypatch):
    first, stop = min(spans[:2]), min(max(spans[:2]), len(table))
    if first >= stop:
        return  # ``cache_blocks`` asks only of a range with a block in it
    told = -1 if spans[2] < 0 else min(stop, max(first, spans[2]))
    indices = sorted({index for index in kept if first <= index < stop})
    keys = [f"k{at}" for at in range(num_keys)]
    on, off = both(monkeypatch, lambda: steps._unhashed_keys(table, keys, stride, first, stop, indices, told))
    assert on == off


def counted_run(trace_spec, config_spec, on: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; with it on, each fast path's answers counted (``seen``)."""
    monkeypatch.setattr(null_runs, "COUNTED", on)
    originals = {name: getattr(null_runs, name) for name in ("states_below", "held_tail_first", "any_held")}

    def states_below(table, retired, last):
        run = table[retired:last]
        seen["state alone"] += on and bool(run) and run[0] is not None and run.count(None) == len(run) - 1
        return originals["states_below"](table, retired, last)

    def held_tail_first(table, has_nulls):
        answer = originals["held_tail_first"](table, has_nulls)
        seen["held sliced"] += on and isinstance(answer, list)
        return answer

    def any_held(table, first, end):
        answer = originals["any_held"](table, first, end)
        seen["none held"] += on and not answer
        return answer

    for name, fake in (("states_below", states_below), ("held_tail_first", held_tail_first)):
        monkeypatch.setattr(null_runs, name, fake)
    monkeypatch.setattr(null_runs, "any_held", any_held)
    result = simulate(build(trace_spec), config_of(config_spec))
    for name, original in originals.items():
        monkeypatch.setattr(null_runs, name, original)
    return (), result


def same_runs(trace_spec, config_spec, monkeypatch) -> dict:
    """Both runs, held equal; what the switch-on run's fast paths counted."""
    seen = {"state alone": 0, "held sliced": 0, "none held": 0}
    try:
        same_both_ways(lambda on: counted_run(trace_spec, config_spec, on, monkeypatch, seen))
    except ValueError:  # the pool cannot hold one max_model_len request (both runs refuse alike)
        pytest.skip("refused")
    return seen


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace_spec=traces, config_spec=configs())
def test_runs_with_nulls_counted_equal_the_reference(trace_spec, config_spec, monkeypatch):
    same_runs(trace_spec, config_spec, monkeypatch)


# a chat on a model with SWA and Mamba groups (its chunks' nulls, the state at ``retired``), timed too; the
# fan-out's private cuts also leave Mamba chunks with no block below the end told skipped ("none held")
PATHS = ("state alone", "held sliced")
FLOORS = (
    (("multiturn", (3, 4, 200, 48, 60, 0)), ("replay", "tiny", {}, 20000), PATHS),
    (("multiturn", (3, 4, 200, 48, 60, 0)), ("timed", "tiny", {"async_scheduling": True}, 20000), PATHS),
    (("fanout", (2, 6, 1500, 300, 100)), ("replay", "inkling", {}, 200000), (*PATHS, "none held")),
)


@pytest.mark.parametrize("case", range(len(FLOORS)))
def test_the_fixed_cases_take_each_fast_path(case, monkeypatch):
    trace_spec, config_spec, paths = FLOORS[case]
    seen = same_runs(trace_spec, config_spec, monkeypatch)
    assert all(seen[path] >= 1 for path in paths), seen
