"""A DataFrame from a long stream of row tuples, built a chunk at a time: a million-request replay would
otherwise hold every row as a tuple of Python objects, and pandas' object matrix of them, at once (about
650 MB at the fan-out's million requests).

pandas infers each column's dtype on its own from that column's values, so a table whose chunks all
infer the same dtype for a column is that dtype whole; the concatenated chunks then hold the same values
as the table built in one go. Where the chunks disagree on any column (a column of strings in one chunk and
of None only in another), the table is built in one go after all, from the rows made again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

CHUNK_LEN = 1 << 16  # rows per chunk: every trace up to this many requests takes the one-go path


def frame_of_rows(
    make_rows: Callable[[], Iterable[tuple]], columns: Sequence[str], chunk_len: int = CHUNK_LEN
) -> pd.DataFrame:
    """``pd.DataFrame(list(make_rows()), columns=columns)``, equal in values and dtypes, with less held at once.
    ``make_rows`` makes the same rows each time it is called (it is called again where chunks disagree)."""
    iterator = iter(make_rows())
    batch = list(itertools.islice(iterator, chunk_len))
    if len(batch) < chunk_len:
        return pd.DataFrame(batch, columns=columns)
    chunks = []
    while batch:
        chunks.append(pd.DataFrame(batch, columns=columns))
        batch = list(itertools.islice(iterator, chunk_len))
    if any(not chunk.dtypes.equals(chunks[0].dtypes) for chunk in chunks[1:]):
        del chunks
        return pd.DataFrame(list(make_rows()), columns=columns)
    return pd.concat(chunks, ignore_index=True)
