"""A memory-bound decode run's steps as machine doubles (``array('d')``), made by numpy once a run rather than a
Python float a step: the same IEEE operations on the same numbers in the same order, so the same floats, bit for
bit (``tests/test_decode_run_arrays.py``).

Each duration is ``overhead + step_bytes / bytes_rate``, ``step_bytes`` an int below 2**53 (the caller's proof:
``decode_run_settled._memory_bound_throughout``), so exact as a double, as Python's ``int / float`` converts it;
numpy divides and adds element by element, each correctly rounded, as Python does (addition is commutative in
IEEE arithmetic, so ``durations += overhead`` is ``overhead + duration``). The ends are one ``np.add.accumulate``
from ``now``: a running sum taken in order (numpy sums pairwise only in reductions, never in an accumulate), the
clock's ``now + duration`` additions one after another. The horizon cut is ``searchsorted`` on those ends, which
never fall (no duration is negative), as ``bisect_left`` finds it.

Why: a timed run of `radix` at 4,000 requests takes ~336,000 decode steps in ~4,200 runs (~80 steps a run). As
lists each step costs a float object for its duration and one for its start, and the step log converts both
into its doubles (``StepLog`` keeps ``array('d')`` columns); as arrays a run is a few numpy calls, and the log
copies each array's bytes at once.
"""

from __future__ import annotations

from array import array

import numpy as np

# below this many steps a run stays lists: numpy's few microseconds a call outweigh what it saves a step
MIN_ARRAY_STEPS = 32


def memory_bound_arrays(
    overhead: float,
    bytes_rate: float,
    bytes_read: int,
    bytes_each: int,
    now: float,
    horizon: float,
    num_steps: int,
) -> tuple[array, array]:
    """The starts and durations of the first ``num_steps`` memory-bound steps from ``now`` (step ``k`` reads
    ``bytes_read + k * bytes_each`` bytes) that end before ``horizon``."""
    step_bytes = np.arange(num_steps, dtype=np.int64) * bytes_each + bytes_read  # exact: below 2**53
    durations = step_bytes / bytes_rate
    durations += overhead
    ends = np.empty(num_steps + 1)
    ends[0] = now
    ends[1:] = durations
    np.add.accumulate(ends, out=ends)
    # the first end not before the horizon ends no step (ends[0] is ``now`` itself: at least one end is read)
    num_taken = max(int(np.searchsorted(ends, horizon)), 1) - 1
    return array("d", ends[:num_taken].tobytes()), array("d", durations[:num_taken].tobytes())
