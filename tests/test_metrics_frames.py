"""records_frame builds the frame pd.DataFrame(rows, columns=...) builds, dtypes included."""
from __future__ import annotations

import pandas as pd

from sim.metrics import REQUEST_COLUMNS, records_frame, request_row
from sim.trace import load_trace


def test_records_frame_equals_the_pandas_constructor_on_request_rows():
    trace = load_trace("traces/multiturn.jsonl")
    rows = []
    for index, request in enumerate(trace):
        times = {} if index % 3 == 0 else {"arrived": 0.5 * index, "first": 0.5 * index + 0.1,
                                           "finished": 0.5 * index + 0.9 if index % 2 else None}
        rows.append(request_row(trace, request.id, None, times, index % 2, "too big" if index == 4 else ""))
    expected = pd.DataFrame(rows, columns=REQUEST_COLUMNS)
    got = records_frame(rows, REQUEST_COLUMNS)
    assert got.equals(expected)
    assert list(got.dtypes) == list(expected.dtypes)
    assert got.to_csv() == expected.to_csv()


def test_records_frame_mixed_columns():
    rows = [{"a": None, "b": 1.5, "c": "x", "d": None, "e": True, "f": None},
            {"a": 2, "b": None, "c": "", "d": None, "e": None, "f": False}]
    expected = pd.DataFrame(rows, columns=list("abcdef"))
    got = records_frame(rows, "abcdef")
    assert got.equals(expected) and list(got.dtypes) == list(expected.dtypes)
