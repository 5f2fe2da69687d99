"""The SGLang loop's lone chunks (``sim/run/chunk_runs.py`` takes a run of them in one event): a long prompt's
chunk after chunk while nothing else can join the pass.

A pass is a lone chunk's where the step in flight is the chunked request's last chunk alone (not its final one:
the request is still ``chunked``), nothing it ended waits to be processed, the overlap loop runs and no mixed
chunk is asked. Then ``_launch`` (``get_new_batch_prefill``) can only: stash the chunk (``stash_chunked_request``),
drop that one-request batch (``filter_batch``: an empty last batch leaves the running batch as it was, with room),
begin the pass (``PrefillAdder``), take the chunked request's next chunk (``add_chunked_req``), and, with
requests waiting, stop at the head where the chunk spent the pass's budget (``budget_state`` "other":
``add_one_req`` is never asked). Processing the step in flight (``process_batch_result``) then does nothing:
it is not a prompt's end, and nothing it ended waits. ``schedule_lone_chunk`` makes exactly those moves; where the budget is not spent it
goes on as ``_admit_waiting`` does, and where no chunk fits as ``_launch`` does (the decode batch).

Between two lone passes nothing but the chunk moved: no request decoded, joined or left, and the chunked
request, still inside its prompt, owes no decode; so the pass's reservations are the last pass's
(``running_decode_offset_of`` over every request), handed back under the rules they are proved for
(``sglang_runs.PAGE_ONLY_RULES``: SGLang's and Marconi's; any other rules begin the pass again).
"""

from __future__ import annotations

from sim.cache.engines.sglang_budget import PassBudget
from sim.sched.batch import Batch
from sim.sched.sglang import SGLangScheduler
from sim.sched.sglang_runs import PAGE_ONLY_RULES

# True: the engine takes a run of lone chunks in one event (``sim/run/chunk_runs.py``) with these passes; False:
# each chunk is the loop's own full step (the reference; tests/test_chunk_runs_property.py holds both equal)
CHUNK_RUNS = True


def lone_chunks_of(scheduler: object) -> SGLangScheduler | None:
    """The scheduler where its passes may be lone chunks' (SGLang's loop), else None."""
    return scheduler if CHUNK_RUNS and isinstance(scheduler, SGLangScheduler) else None


def lone_chunk_next(s: SGLangScheduler) -> bool:
    """Whether the next pass is a lone chunk's (above): the step in flight is the chunked request's chunk alone."""
    chunked, launched = s.chunked, s._launched
    if chunked is None or launched is None or s._done or not s.overlap or s.mixed_chunk:
        return False
    items = launched.items
    return (
        len(items) == 1
        and items[0].is_prefill
        and items[0].plan.request_id == chunked.request_id
        and chunked.request_id in s.manager.requests
    )


def schedule_lone_chunk(
    s: SGLangScheduler, iteration: int, kept: PassBudget | None
) -> tuple[Batch, PassBudget | None]:
    """``schedule`` where ``lone_chunk_next`` holds: the same moves, in the same order. ``kept``: the last lone
    pass's reservations in this run (None: the pass is begun). Returns the batch and the reservations to keep."""
    chunked = s.chunked
    assert chunked is not None, "a lone chunk's pass has a chunked request"
    num_given_up, request_id = len(s.given_up), chunked.request_id
    manager, rules = s.manager, s.rules
    batch = Batch(iteration)
    manager.settle(request_id, 0)  # stash_chunked_request
    s.batch_is_full = False  # the last batch (the chunk alone) filtered to nothing: room
    s._last_extend = []
    s._filter_running()
    kept = _begin_pass(s, request_id, kept)
    s.order.calc_priority(s.waiting)  # SchedulePolicy.calc_priority
    added = []
    chunk = manager.next_chunk_len(request_id, rules.pass_budget.chunk)
    if chunk > 0:
        added.append((chunked, chunk))
    if s.waiting and rules.budget_state(manager) != "other":  # the budget is not spent: add_one_req is asked
        s._admit_waiting(added)
        for state, _ in added:
            if state in s.waiting:
                s.waiting.remove(state)
    s._allocate(batch, added)
    if batch.items:
        s._last_extend = [s._state(item.plan.request_id) for item in batch.items]
    else:
        s._decode(batch)
    return _schedule_tail(s, iteration, batch, num_given_up), kept


def _begin_pass(s: SGLangScheduler, request_id: str, kept: PassBudget | None) -> PassBudget | None:
    """``PrefillAdder.__init__``: the last lone pass's reservations where they are proved the same (the chunked
    request still inside its prompt), else the pass begun; the reservations to keep for the next."""
    manager, rules = s.manager, s.rules
    req = manager.requests[request_id]
    in_flight = frozenset((request_id,))
    proved = type(rules) in PAGE_ONLY_RULES and req.kv_len < req.prompt_len
    if kept is not None and proved:
        rules.in_flight, rules.pass_budget = in_flight, kept
        manager._pass_open = True
        return kept
    manager.begin_pass(in_flight)
    return rules.pass_budget if proved else None


def _schedule_tail(s: SGLangScheduler, iteration: int, batch: Batch, num_given_up: int) -> Batch:
    """``schedule`` after its launch: a second launch where the pass released memory (a request given up on)
    and launched nothing. Processing the step in flight, the chunk alone, does nothing: it is not the prompt's
    end (the request stayed ``chunked``) and nothing it ended waits (``_done`` is empty)."""
    released = len(s.given_up) > num_given_up
    if released and not batch:
        batch = s._launch(iteration)
    s._launched = batch if (s.overlap and batch) else None
    s.clock.launched(batch)
    return batch
