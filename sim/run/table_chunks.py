"""A DataFrame from a long stream of row tuples, built a chunk at a time: a million-request replay would
otherwise hold every row as a tuple of Python objects, and pandas' object matrix of them, at once (about
650 MB at the fan-out's million requests).

pandas infers each column's dtype on its own from that column's values, so a table whose chunks all
infer the same dtype for a column is that dtype whole; the concatenated chunks then hold the same values
as the table built in one go. Where the chunks disagree on any column (a column of strings in one chunk and
of None only in another), the table is built in one go after all, from the rows made again.

The chunks are kept column by column (``BY_COLUMN``) and the table is joined a column at a time, each column's
pieces freed as it is joined: the table and one column are held at once, not the chunks and the whole table
(``pd.concat``) on top of the run's records.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

CHUNK_LEN = 1 << 16  # rows per chunk: every trace up to this many requests takes the one-go path


# Off: the chunks are joined whole by ``pd.concat`` (the reference ``BY_COLUMN`` is held to: tests/test_table_chunks.py)
BY_COLUMN = True


def frame_of_rows(
    make_rows: Callable[[], Iterable[tuple]], columns: Sequence[str], chunk_len: int = CHUNK_LEN
) -> pd.DataFrame:
    """``pd.DataFrame(list(make_rows()), columns=columns)``, equal in values and dtypes, with less held at once.
    ``make_rows`` makes the same rows each time it is called (it is called again where chunks disagree)."""
    iterator = iter(make_rows())
    batch = list(itertools.islice(iterator, chunk_len))
    if len(batch) < chunk_len:
        return pd.DataFrame(batch, columns=columns)
    by_column = BY_COLUMN and len(set(columns)) == len(columns)  # a column a block needs unique names
    chunks = []
    while batch:
        chunks.append(pd.DataFrame(batch, columns=columns))
        del batch  # the rows' tuples go before the next chunk's are made
        if by_column:
            chunks[-1] = _columns_of(chunks[-1])
        batch = list(itertools.islice(iterator, chunk_len))
    if any(not chunk.dtypes.equals(chunks[0].dtypes) for chunk in chunks[1:]):
        del chunks
        return pd.DataFrame(list(make_rows()), columns=columns)
    return _joined(chunks) if by_column else pd.concat(chunks, ignore_index=True)


def _columns_of(chunk: pd.DataFrame) -> pd.DataFrame:
    """The chunk with a block of its own per column (copied out of pandas' shared blocks), so that a column
    joined into the table frees its piece of every chunk."""
    return pd.DataFrame({name: chunk[name].copy() for name in chunk.columns}, copy=False)


def _joined(chunks: list[pd.DataFrame]) -> pd.DataFrame:
    """``pd.concat(chunks, ignore_index=True)`` a column at a time, each column's pieces dropped once joined."""
    data = {}
    for name in list(chunks[0].columns):
        data[name] = pd.concat([chunk[name] for chunk in chunks], ignore_index=True)
        for chunk in chunks:
            del chunk[name]
    return pd.DataFrame(data, copy=False)
