"""The cycle collector paused while a simulation runs (and while a Mooncake trace is imported).

The simulator's objects die by reference counting: a deleted tree node is unreachable once its parent
drops it and its heap entries pop, and a finished request's lists go with it. A run makes almost no
cyclic garbage (tests/test_gc_pause.py counts it), yet the collector's full passes over the long-lived
tree, heaps and trace took 25 to 30% of a Mooncake replay (docs/benchmarks.md). Pausing it leaves peak
memory unchanged; the caller's setting comes back afterwards, whatever happens. It sits below every layer:
the trace's importer (``sim/trace/mooncake_import.py``) pauses it too.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
