"""``VllmScheduler``'s batch runs (timed mode): where nothing waits, nothing finishes and every running request
decodes, its coming decode steps taken in one event, block boundaries included (the block manager's
``take_decode_batch``), where the plain runs (``plain_steps``) stop at the first step that frees, allocates or
hashes a block for any request: with ~7 requests running at 4,000 Mooncake requests, most steps do.

Where the bounds listen (``StepStarted``, their recorder a batch reader: ``EventBus.subscribe_batch_reader``), the
loop announces exactly its full steps: in a steady run (every group of one block size, ``steady_batch``) those
are the busy steps, where ``plain_steps`` stops (its hash-block residues are then the busy ends'), each with
every running request's next token in running order. A batch run's busy steps carry that batch (a
``DecodeBatch`` from the lengths before the run), announced after the run (``Engine._announce_batch_run``):
a batch reader reads nothing else, and no request finishes in the run (``- 2``).
"""

from __future__ import annotations

from sim.cache.blocks.decode_batch import take_decode_batch
from sim.cache.blocks.manager import BlockCacheManager
from sim.cache.interface import CacheModel
from sim.sched.batch import DecodeBatch, FullStep, batch_lengths
from sim.sched.request import RequestState

# False: a run stops before any block boundary and the loop takes that step in full (the reference;
# tests/test_vllm_batch_runs_property.py holds the two equal)
BATCH_RUNS = True
# True: batch runs go on where only batch readers listen to ``StepStarted`` (the bounds), their busy steps announced
# with their batches; False: any listener turns them off (the reference; tests/test_vllm_batch_runs_bounds.py)
ANNOUNCED_RUNS = True


def batch_run_steps(manager: CacheModel, runs: list[RequestState]) -> int:
    """How many steps a batch run of ``runs`` (every running request, all decoding) may be asked for: each stops
    a step short of its last output, as ``plain_steps`` does; 0 where the switch is off, the cache is not
    vLLM's blocks or a step event is listened to (the run's steps are announced after it), but by batch readers
    (``ANNOUNCED_RUNS``)."""
    if not BATCH_RUNS or not isinstance(manager, BlockCacheManager):
        return 0
    events = manager.events
    if events.reads_step_events():
        return 0
    if events.reads_batches() and not (ANNOUNCED_RUNS and events.only_batch_readers()):
        return 0
    fewest = min(run.output_len - run.decoded - 2 for run in runs)
    return fewest if fewest > 0 else 0


def take_batch_run(
    manager: CacheModel, runs: list[RequestState], iteration: int, num_steps: int
) -> tuple[int, list[FullStep]]:
    """Up to ``num_steps`` steps of the batch run ``batch_run_steps`` allowed: the steps taken, and those that
    moved the pools as event steps (their pools after them), each with its batch where the bounds read it."""
    assert isinstance(manager, BlockCacheManager)
    reqs = [manager.requests[run.request_id] for run in runs]
    lengths = batch_lengths(reqs, manager.events.reads_batches())
    taken, steps = take_decode_batch(manager, reqs, iteration, num_steps)
    for run in runs:
        run.decoded += taken
    if lengths is None:
        return taken, [FullStep(offset, 0, None, usage) for offset, usage in steps]
    ids = [run.request_id for run in runs]
    return taken, [
        FullStep(offset, 0, DecodeBatch.of_ids(iteration + offset, ids, lengths, offset), usage)
        for offset, usage in steps
    ]
