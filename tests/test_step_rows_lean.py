"""The step table's two leaner writes leave every table as the reference: a run of steps' numbers as one int64
block (``sim/run/step_log.py``'s ``STEP_NUMBERS_IN_BULK``; the reference appends one Python int at a time) and
each row's pools read with the three pools' usages written out (``sim/cache/topology.py``'s
``USAGE_WRITTEN_OUT``; the reference loops over the pools).

Two logs fed the same rows and runs (step numbers anywhere in int64, runs of 0 to 300 steps) hold the same
columns, byte for byte, and the same frame; pools of any size, partly handed out, with any tree counts, read the
same usages (keys in the same order); whole timed runs of every loop that writes runs (the default loop's
``no-cache`` and ``marconi-vllm``, FreeToken's, SGLang's ``radix``), bounds on and off, on pools apart and on one
byte budget, give the same tables with both switches on and both off, and the fixed bursts put floors on how many
runs of two steps or more went in bulk and how many rows' pools were read written out."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from step_feeds import fed_log

from sim.cache import byte_budget, topology
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.sizing import PoolSizes
from sim.run import step_log
from sim.run.simulate import SimConfig, simulate
from sim.run.step_log import STEP_COLUMNS, StepLog
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

ROW = st.tuples(st.integers(0, 1 << 40), st.floats(0, 1e6), st.floats(0, 1.0), st.integers(0, 9))
RUN = st.tuples(st.integers(0, (1 << 62) - 400), st.integers(0, 300), st.integers(1, 64))
FEEDS = st.lists(st.one_of(ROW.map(lambda row: ("row", row)), RUN.map(lambda run: ("run", run))), max_size=12)


def _row_by_row_log() -> StepLog:
    """A log writing its integer columns row by row (``INT_COLUMNS_AS_BLOCKS`` off: the columns this file
    compares; the blocks have their own file, tests/test_step_blocks.py)."""
    with mock.patch.object(step_log, "INT_COLUMNS_AS_BLOCKS", False):
        return StepLog()


def _fed(feeds: list, in_bulk: bool) -> StepLog:
    with mock.patch.object(step_log, "STEP_NUMBERS_IN_BULK", in_bulk):
        return fed_log(_row_by_row_log(), feeds, _full_row)


def _full_row(args: tuple) -> tuple:
    """A drawn row (step, start, duration, num_decode) as a decode-only step's six values."""
    step, start, duration, num_decode = args
    return (step, start, duration, 0, 0, num_decode)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(FEEDS)
@example([("run", (0, 0, 3)), ("row", (0, 0.0, 0.1, 2)), ("run", (1, 5, 2)), ("run", (6, 1, 2))])
@example([("row", (3, 1.0, 0.1, 1)), ("run", ((1 << 62) - 400, 300, 64))])
def test_a_runs_step_numbers_in_bulk_are_the_reference_column(feeds):
    bulk, reference = _fed(feeds, True), _fed(feeds, False)
    for name in STEP_COLUMNS:
        assert bulk.columns[name] == reference.columns[name], name
    assert len(bulk) == 1 + sum(args[1] if kind == "run" else 1 for kind, args in feeds)
    assert bulk.frame().equals(reference.frame())


class _Tree:
    """What ``pool_usage`` reads of a tree: its counts."""

    def __init__(self, num_full_pages: int, num_swa_pages: int, num_states: int):
        self.num_full_pages, self.num_swa_pages, self.num_states = num_full_pages, num_swa_pages, num_states


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.tuples(st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 300)),
    st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
    st.booleans(),
    st.booleans(),
)
@example((40, 0, 0), (1.0, 0.0, 0.0), False, False)
@example((100, 80, 12), (0.5, 0.25, 1.0), True, True)
def test_usage_written_out_is_the_pools_loop(sizes, handed, has_swa, has_mamba):
    """Some of each pool handed out, part of it (a third) said to be the tree's."""
    pools = topology.component_pools(PoolSizes(*sizes), has_swa, has_mamba)
    held = []
    for comp, share in zip((FULL, SWA, MAMBA), handed, strict=True):
        count = int(pools[comp].size * share)
        pools[comp].alloc(count)
        held.append(count // 3)
    tree = _Tree(*held)
    written = topology.pool_usage(pools, tree)
    with mock.patch.object(topology, "USAGE_WRITTEN_OUT", False):
        reference = topology.pool_usage(pools, tree)
    assert written == reference and list(written) == list(reference)
    assert all(type(usage) is type(reference[comp]) for comp, usage in written.items())


def _counted(trace: Trace, config: SimConfig) -> dict:
    """The run with both switches on, asserted table by table equal to the run with both off; returns how many
    runs of two steps or more it wrote (``runs``) and how many pool reads it made (``usages``)."""
    counts = {"runs": 0, "usages": 0}
    extend, usage = StepLog._extend_decodes, topology.pool_usage

    def counting_runs(log, first_step, starts, durations, num_decode):
        counts["runs"] += len(starts) >= 2
        return extend(log, first_step, starts, durations, num_decode)

    def counting_usages(pools, tree):
        counts["usages"] += 1
        return usage(pools, tree)

    with (
        mock.patch.object(StepLog, "_extend_decodes", autospec=True, side_effect=counting_runs),
        mock.patch.object(topology, "pool_usage", side_effect=counting_usages),
        mock.patch.object(byte_budget, "pool_usage", side_effect=counting_usages),
    ):
        lean = simulate(trace, config)
    with (
        mock.patch.object(step_log, "STEP_NUMBERS_IN_BULK", False),
        mock.patch.object(step_log, "INT_COLUMNS_AS_BLOCKS", False),
        mock.patch.object(topology, "USAGE_WRITTEN_OUT", False),
    ):
        reference = simulate(trace, config)
    assert lean.steps.equals(reference.steps)
    assert lean.requests.equals(reference.requests)
    assert lean.summary == reference.summary
    return counts


@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm", "freetoken", "radix"])
def test_whole_runs_write_their_rows_leaner(policy, page):
    knobs = dict(page_size=page, track_interval=64)
    for bounds in (False, True):
        config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds)
        counts = _counted(Trace(growing_burst(6)), config)
        assert counts["runs"] >= 3 and counts["usages"] >= 10


@pytest.mark.parametrize("bounds", [False, True])
def test_rows_on_one_byte_budget_read_their_pools_written_out(bounds):
    """Marconi's byte budget shares one budget among the three pools (``sim/cache/byte_budget.py``), read alike."""
    config = SimConfig(policy="marconi", model="inkling", mode="timed", cache_bytes=2e9, bounds=bounds)
    counts = _counted(Trace(growing_burst(6)), config)
    assert counts["runs"] >= 3 and counts["usages"] >= 10
