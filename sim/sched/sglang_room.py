"""The room an SGLang batch run's step needs to evict nothing (``sglang_runs``, ``sglang_fast``).

A full decode step of the SGLang loop asks its KV pools, in order: ``check_decode_mem`` the pages the step
starts, ``alloc_paged_token_slots_decode`` a page per running request (``_evict_for``), and then each request's
``prepare_decode`` ``evict_ahead(0)`` (the rules' slack) and its page's reservation, each ask evicting only
where a pool is short (``topology.reserve``, Marconi's evictor: ``_short``). So on pools apart a step of ``n``
requests starting ``p`` pages from ``free`` free pages evicts nothing where ``free >= n`` and
``free >= p + slack`` (the last ask sees every page of the step out, and the slack free past them). A batch
run's reference keeps a page per request and the slack past the step's pages, ``free >= n + slack + p``: a
step between the two was left to the loop as a full step (Round 32: 517 of `radix`'s 7,689 at 4,000 requests).
"""

from __future__ import annotations

from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache

# True: under the rules the batch run's shortcuts are proved for, on pools apart, a run's steps fit where the
# full step would evict nothing (``free >= max(n, p + slack)``); False: the room a batch run keeps, the reference
EXACT_ROOM = True


def exact_room(manager: CacheManager, proved: bool) -> bool:
    """Whether the run reads the full step's own room (``EXACT_ROOM``): ``proved``, the rules are those of
    ``sglang_runs.PAGE_ONLY_RULES``, and the KV pools are apart (a byte budget weighs states with KV)."""
    return EXACT_ROOM and proved and manager.topology.name == "separate"


def step_has_room(manager: CacheManager, rules, num_reqs: int, num_pages: int, exact: bool) -> bool:
    """Whether a decode step of ``num_reqs`` requests starting ``num_pages`` pages evicts nothing for them:
    ``exact``, the full step's own asks; else the room a batch run keeps past the step."""
    room, slack = manager.topology.kv_room(manager.has_swa), rules.alloc_slack_pages
    if exact:
        return room >= num_reqs and room >= num_pages + slack
    return room - slack - num_reqs >= num_pages


def run_has_room(manager: CacheManager, reqs: list[RequestCache], exact: bool) -> bool:
    """Whether a batch run may start: its first step, were it quiet, evicts nothing (``exact``), else the
    room a batch run keeps is there (``batch_run_room``)."""
    if exact:
        return step_has_room(manager, manager.rules, len(reqs), 0, True)
    return manager.batch_run_room(reqs) >= 0
