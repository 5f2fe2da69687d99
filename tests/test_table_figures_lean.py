"""The summary's step-table figures read as numpy arrays are the reference's: ``slo.ITL_GAP_AT_RANK`` (each ITL
percentile the one gap at its rank, the ends summed as arrays) and ``metrics.OCCUPANCY_BY_ARRAY`` (each pool's held
slots summed in place) give the same figures as the pandas columns on generated step tables (ties, empty tables,
steps without decodes), and whole timed runs give the same tables and summary with both off."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run

from sim.run import metrics, slo
from sim.run.metrics import POOL_COLUMNS, occupancy
from sim.run.simulate import SimConfig, simulate
from sim.run.slo import itl_percentiles
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

TIME = st.floats(0, 1e4, allow_nan=False)
STEP = st.tuples(TIME, st.sampled_from([0.0, 0.25, 0.5]) | st.floats(0, 2.0), st.integers(0, 300))
POOLS = st.tuples(*[st.integers(0, 1 << 40)] * len(POOL_COLUMNS))
STEPS = st.lists(st.tuples(STEP, POOLS), max_size=40)


def _table(steps: list) -> pd.DataFrame:
    """A step table of ``steps`` (start, duration, decodes; pools), its columns' dtypes the run's."""
    columns = {
        "start_at": np.array([step[0] for step, _ in steps], dtype=np.float64),
        "duration_s": np.array([step[1] for step, _ in steps], dtype=np.float64),
        "num_decode": np.array([step[2] for step, _ in steps], dtype=np.int64),
    }
    columns.update(
        {name: np.array([p[i] for _, p in steps], dtype=np.int64) for i, name in enumerate(POOL_COLUMNS)}
    )
    return pd.DataFrame(columns)


def _figures(table: pd.DataFrame, on: bool) -> tuple[dict, dict]:
    with (
        mock.patch.object(slo, "ITL_GAP_AT_RANK", on),
        mock.patch.object(metrics, "OCCUPANCY_BY_ARRAY", on),
    ):
        return itl_percentiles(table), occupancy(table, 16)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(STEPS)
@example([])
@example([((0.0, 0.5, 0), (0,) * 9)] * 3)
@example(
    [
        ((0.0, 0.5, 2), (1,) * 9),
        ((0.5, 0.5, 2), (2,) * 9),
        ((1.0, 0.25, 1), (3,) * 9),
        ((1.25, 0.1, 0), (4,) * 9),
    ]
)
def test_the_figures_by_array_are_the_columns(steps):
    table = _table(steps)
    assert _figures(table, True) == _figures(table, False)


@pytest.mark.parametrize("policy", ["radix", "marconi-sglang", "no-cache", "vllm"])
def test_whole_runs_make_the_same_summary(policy):
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16), bounds=False)
    trace = Trace(growing_burst(6))
    lean = simulate(trace, config)
    with (
        mock.patch.object(slo, "ITL_GAP_AT_RANK", False),
        mock.patch.object(metrics, "OCCUPANCY_BY_ARRAY", False),
    ):
        reference = simulate(trace, config)
    assert_same_run(lean, reference)
    assert len(lean.steps) > 50 and lean.summary == reference.summary
