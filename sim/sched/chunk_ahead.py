"""Whether the default loop's next step certainly takes a prompt chunk: then no coming step is a plain or batch
decode step, and ``DefaultScheduler.plain_decode_run`` answers 0 without asking each decoding request.

``plain_decode_run`` answers a positive count only where every running request still in its prompt gets no chunk
at each step of the run: in a batch run where ``chunk_stays_stalled`` (or the capped memo) says so for each, in
plain steps where ``stalled_chunk_steps`` leaves each stalled for some steps. A request the memo does not hold,
whose chunk under the step's budget is not nothing (``budgeted_chunk``) and which the rules do not find stalled
now (``chunk_stalled_at(..., 0)``) fails both: ``chunk_stays_stalled`` asks exactly these for it, and
``stalled_chunk_steps`` answers 0 for it, as a chunk stalled at a later step was stalled at every step before
(the rules' contract, which its binary search reads too). In ``marconi-vllm`` timed runs most steps prefill a
page chunk beside decodes: the decoding requests' plain-step counts were asked each step only to be thrown away.
"""

from __future__ import annotations

from collections.abc import Iterable

from sim.cache.manager import CacheManager
from sim.sched.capped_stalls import CappedStalls
from sim.sched.request import RequestState

# False: every step asks the decoding requests (the reference; tests/test_chunk_ahead_property.py holds both equal)
ASK_CHUNKS_FIRST = True
# True: ``plain_decode_run`` asks whether a chunk comes next from the running requests' count of decoders, before
# it lists them (most ``marconi-vllm`` timed steps are prefill steps, where the answer is yes); False: it lists the
# decoding requests first (the reference; tests/test_step_runs_property.py holds both equal)
ASKED_BEFORE_LISTING = True


def takes_chunk_next(
    manager: CacheManager, capped: CappedStalls, running: Iterable[RequestState], budget: int
) -> bool:
    """Whether some running request in its prompt gets a chunk under ``budget`` at the next step, as far as the
    rules say it now (a chunk stalled only by the pools is not said to be taken)."""
    if not ASK_CHUNKS_FIRST:
        return False
    rules, requests = manager.rules, manager.requests
    for run in running:
        req = requests[run.request_id]
        if req.kv_len >= run.prompt_len or run.request_id in capped.told or capped.holds(run.request_id):
            continue
        chunk = rules.budgeted_chunk(req, budget)
        if chunk > 0 and not rules.chunk_stalled_at(manager, req, chunk, 0):
            return True
    return False


def budget_left_by_decodes(
    manager: CacheManager | None, running: dict[str, RequestState], budget: int
) -> int | None:
    """What the next step's decodes leave of ``budget`` for chunks, where some running request decodes and the
    caller may ask ``takes_chunk_next`` with it before listing the decoders (``plain_decode_run`` answers 0 on a yes,
    as it would after listing them: the answer reads no order, any prompt's chunk makes it yes); None: none
    decodes, no radix manager, or the reference (ask after listing)."""
    if not ASKED_BEFORE_LISTING or manager is None:
        return None
    requests, decoding = manager.requests, 0
    for run in running.values():
        if requests[run.request_id].kv_len >= run.prompt_len:
            decoding += 1
    return budget - decoding if decoding else None
