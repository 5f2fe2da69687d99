"""A freeing stretch's page steps told to the bounds' recorder as one batch (``StretchSteps``), not a
``DecodeBatch`` a full step.

At 4,000 ``no-cache`` requests SGLang's freeing stretches (``sglang_free_stretch.py``) hand the recorder ~27,000
page-step batches, each made with its own lists of ids and states, and the recorder reads each request of each
one. Every batch of a stretch is made after the stretch is taken, from the same lengths: one object with the
steps' offsets says the same. The recorder reads it at once (``sim/bounds/stretch_record.py``): a request whose
open run holds its token's page extends that run to its last step's page, the others step by step.

It is told only where a batch reader alone listens and the run's full steps go in one ``StepStarted``
(``run_steps.told_whole``: the freeing stretch runs only where batch readers alone listen), so no reader sees it
as one step's batch; ``sglang_free_stretch.STRETCH_AS_ONE`` off: a ``DecodeBatch`` a full step (the reference).
"""

from __future__ import annotations

from sim.cache.request import RequestCache
from sim.sched.batch import Batch, BatchItem, FullStep


class StretchSteps(Batch):
    """The page steps of a stretch: at each step ``offsets[j]`` (and the ``counts[j]`` - 1 steps after it, a run of
    steps starting the same pages) request ``request_ids[i]`` computes its token at ``lengths[i] + offset``.
    ``iteration``: the first step's. A batch reader reads it as those steps' ``DecodeBatch``es in order; it has
    no items of one step."""

    def __init__(
        self,
        iteration: int,
        request_ids: list[str],
        lengths: list[int],
        offsets: list[int],
        counts: list[int],
    ):
        self.iteration, self.request_ids, self.lengths = iteration, request_ids, lengths
        self.offsets, self.counts = offsets, counts

    @property
    def items(self) -> list[BatchItem]:
        raise TypeError("a stretch's steps are read from their lengths (sim/bounds/stretch_record.py)")

    @items.setter
    def items(self, items: list[BatchItem]) -> None:
        raise TypeError("a stretch's steps are read from their lengths (sim/bounds/stretch_record.py)")

    def __bool__(self) -> bool:
        return bool(self.lengths)

    def token_offsets(self) -> list[int]:
        """Every step's offset from the lengths, in order (a run of steps each)."""
        tokens: list[int] = []
        for offset, count in zip(self.offsets, self.counts, strict=True):
            tokens.extend(range(offset, offset + count))
        return tokens


def told_as_one(
    runs: list[FullStep], reqs: list[RequestCache], lengths: list[int], iteration: int, done: int
) -> list[FullStep]:
    """The stretch's full steps (``runs``, from run offset ``done``), the first carrying the ``StretchSteps`` of
    all of them, the others none."""
    if not runs:
        return runs
    first = runs[0]
    offsets = [run.offset - done for run in runs]
    steps = StretchSteps(
        iteration + first.offset,
        [req.request_id for req in reqs],
        lengths,
        offsets,
        [run.num_steps for run in runs],
    )
    return [first._replace(batch=steps)] + runs[1:]
