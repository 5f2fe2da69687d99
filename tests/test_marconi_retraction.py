"""Marconi and SGLang+ on SGLang's loop retract as SGLang does (``retract_decode``) under a byte budget, and a
retracted request's re-admission charges the pass its whole ``max_new_tokens`` (``sglang_admission.charge``).

Worked by hand on a step clock, model ``tiny`` (page 1: a token of KV is 256 bytes of FULL and 256 of SWA,
Marconi keeps both for every token; a MAMBA state 9,152 bytes, three a running request), a budget of 8,400
tokens of KV (4,300,800 bytes); a and b (prompts 10 and 12, 4,500 outputs each: past SGLang's 4,096-token
decode estimate, so both are admitted) arrive at 0, c (100 + 100) at step 4,300:

- step 0: a and b prefill together; from step 1 they decode, a token of KV each a step. After step 4,135 they
  hold 22 + 2 x 4,135 tokens and six states: 4,300,416 bytes; step 4,136's two tokens (1,024 bytes) do not
  fit. ``retract_decode`` keeps the most outputs, then the shorter prompt: both have 4,135 outputs, so b (the
  longer prompt, 4,147 tokens reached) is retracted, its KV freed with nothing inserted; a decodes alone.
- b waits first in the queue (c arrived after it was retracted, FCFS) and the pass stops at it: a alone
  leaves 8,337 - t tokens free at step t and reserves its 4,500 - t outputs to come, about 3,837, less than
  b's 4,147 (prompt and outputs again) + 365 + a page + its three states (54 tokens).
- a's last step is 4,499; at step 4,500 its result is processed (the overlap loop), its KV goes to the tree
  (evictable) and b is re-admitted: 4,147 tokens prefilled again. The pass is charged b's whole decode,
  min(365 + 4,135, 4,096) = 4,096, not the 365 still to come: 8,346 tokens (the budget less b's states) less
  4,147 + 1 + 4,096 leaves 102, short of c's 100 + 100 + 1 + 54; charged 365, c would have gone along.
- step 4,501: c prefills (b's decode waits: a prefill batch runs apart); from 4,502 both decode: c finishes
  at 4,601 (its 100th output), b at 4,866 (its first token again at 4,500, then 364 decode steps).
"""

from __future__ import annotations

import pytest

from sim.cache.events import EventBus, Retracted, StepStarted
from sim.run.backend import FixedStepBackend
from sim.run.setup import build
from sim.run.simulate import SimConfig, run_timed
from sim.trace import Request, Segment, Trace

BUDGET_BYTES = 8400 * 512


def _trace() -> Trace:
    def request(rid: str, at: float, prompt_len: int, output_len: int) -> Request:
        return Request(id=rid, arrival=at, prompt=[Segment(ref=rid, len=prompt_len)], output_len=output_len)

    return Trace([request("a", 0, 10, 4500), request("b", 0, 12, 4500), request("c", 4300, 100, 100)])


def _run(policy: str) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """Every step's batch (request, tokens, prefill), the retractions (the step whose scheduling retracted,
    request, tokens reached) and each request's (cached tokens, first token at, finished at)."""
    batches: list[tuple] = []
    retracted: list[tuple] = []

    def record(events: EventBus) -> None:
        def started(event: StepStarted) -> None:
            batch = event.batch.items
            batches.append(tuple((i.plan.request_id, i.plan.end - i.plan.start, i.is_prefill) for i in batch))

        events.subscribe(StepStarted, started)
        events.subscribe(
            Retracted, lambda event: retracted.append((len(batches), event.request_id, event.reached))
        )

    config = SimConfig(policy=policy, model="tiny", mode="timed", bounds=False, cache_bytes=BUDGET_BYTES)
    result = run_timed(
        _trace(), build(config), backend=FixedStepBackend(1.0), fast_path=False, observe=record
    )
    rows = [(int(r.cached_tokens), r.first_token_at, r.finished_at) for r in result.requests.itertuples()]
    return batches, retracted, rows


@pytest.mark.parametrize("policy", ["marconi", "marconi-sglang"])
def test_a_retracted_request_is_readmitted_with_its_whole_decode_charged(policy):
    batches, retracted, rows = _run(policy)
    assert batches[0] == (("a", 10, True), ("b", 12, True))
    assert all(batch == (("a", 1, False), ("b", 1, False)) for batch in batches[1:4136])
    assert retracted == [(4136, "b", 4147)]
    assert all(batch == (("a", 1, False),) for batch in batches[4136:4500])
    assert batches[4500:4503] == [
        (("b", 4147, True),),
        (("c", 100, True),),
        (("b", 1, False), ("c", 1, False)),
    ]
    assert all(batch == (("b", 1, False), ("c", 1, False)) for batch in batches[4502:4601])
    assert all(batch == (("b", 1, False),) for batch in batches[4601:])
    assert len(batches) == 4866
    assert rows == [(0, 1.0, 4500.0), (0, 1.0, 4866.0), (0, 4502.0, 4601.0)]
