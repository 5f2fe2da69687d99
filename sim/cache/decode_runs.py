"""The decode fast path both cache managers share: runs of plain steps taken in one go, the others one by one.

A manager offers ``requests``, ``solo_decode_steps(req, iteration)``, ``take_solo_decodes(req, n)``,
``prepare_decode`` and ``complete_decode``; what makes a step one of a run is the manager's own rule (the
request decodes alone: its run may start pages, as no other request's step comes in between).
"""

from __future__ import annotations

from sim.cache.results import Refusal


def advance_decode(manager, request_id: str, num_steps: int, iteration: int) -> int:
    """Run up to ``num_steps`` decode steps (one per engine iteration from ``iteration``) exactly as
    ``prepare_decode`` + ``complete_decode`` would; runs of steps that only lengthen the request and take
    the pages they start skip the bookkeeping. Returns the steps done: fewer when the pools refuse one (that step is not taken)."""
    req = manager.requests[request_id]
    done = 0
    while done < num_steps:
        plain = min(manager.solo_decode_steps(req, iteration + done), num_steps - done)
        if plain:
            manager.take_solo_decodes(req, plain)
            done += plain
            continue
        if isinstance(manager.prepare_decode(request_id, iteration + done), Refusal):
            return done
        manager.settle(request_id, 1)  # an overlap loop processes the prompt's step now
        manager.complete_decode(request_id)
        done += 1
    return num_steps
