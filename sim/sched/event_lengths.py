"""An SGLang batch run's event step's batch, where the bounds read it, kept as its requests' lengths (a
``DecodeBatch``) with the plans of only those requests whose step ``prepare_decode`` planned.

The reference (``LENGTHS_BATCH`` off) builds the batch item by item (``sglang_event_plans.plan_each`` /
``plan_needs``): each quiet or page-only request's item is the plain plan of its length and state
(``new_chunk_plan(id, kv_len, kv_len + 1, state)``: ``prepare_page_decode`` moves neither), and the bounds'
recorder reads every item through its generic path (a lookup check and a produce an item). At 4,000 Mooncake
requests ``no-cache`` runs 3,960 such steps with 17,813 requests in all (Round 42 found 21,764 before the freeing
stretches, ``sglang_free_stretch.py``, took the SWA frees' steps; Round 46 brought the switch back on top of them).

The lengths batch keeps the ids, states and lengths as they are when the step's plans begin: no plan moves a
request's length or state (``complete_decodes`` comes after them, and the out-of-window frees before), so a quiet
request's plain plan is the one its length and state make, and the ``items`` the batch makes when first read are
the reference's. The recorder reads its lengths (``EventRecorder._record_decode_step``): a decode step looks up
nothing (its requests run, each looked up at its admission's first chunk) and computes the token at its length,
where every item's plan starts (``start == kv_len``, ``end == kv_len + 1``, a planned one's too).
"""

from __future__ import annotations

from sim.cache.request import RequestCache
from sim.cache.results import ChunkPlan
from sim.sched.batch import Batch, DecodeBatch

# True: an event step's batch, where the bounds read it, is its requests' lengths and the planned requests' plans
# (``DecodeBatch``); False: a ``Batch`` of every request's plan (the reference; tests/test_event_lengths_property.py
# holds both equal)
LENGTHS_BATCH = True


def event_batch(reqs: list[RequestCache], iteration: int) -> Batch:
    """The batch an event step's plans fill: a lengths batch (``LENGTHS_BATCH``), or an empty ``Batch``."""
    if not LENGTHS_BATCH:
        return Batch(iteration)
    lengths = [req.kv_len for req in reqs]
    return DecodeBatch.of_requests(iteration, reqs, lengths, 0, [None] * len(reqs))


def planned_slots(batch: Batch | None) -> list[ChunkPlan | None] | None:
    """A lengths batch's plans, by request index, for the plans to fill where ``prepare_decode`` made one;
    None where the batch takes every request's item (a ``Batch``) or none is read (None)."""
    return batch.plans if type(batch) is DecodeBatch else None
