"""``PrefillAdder.add_one_req_ignore_eos``'s check of the decode still owed (SGLang 0.5.23, skipped with hybrid
SWA): after a request fits, the pass's ``req_states`` (each running, continued and added request's decode left
and the tokens it holds, sorted by decode left) must leave room to finish them all, the shortest first, each
freeing what it held once done. ``insert_state`` and ``decode_fits`` are that arithmetic; ``NoCacheRules``
gathers the states."""

from __future__ import annotations

IGNORE_EOS_RESERVE_TOKENS = (
    1  # schedule_policy.IGNORE_EOS_RESERVE_TOKENS: kept free per request for corner cases
)

State = tuple[int, int]  # (tokens_left: decode still owed, tokens_occupied: prompt and outputs held)


def insert_state(states: list[State], state: State) -> None:
    """``add_req_state(insert_sort=True)`` as written: before the first state owing at least as much; where
    none does, before the last one (the loop's index stops there), not after it."""
    i = 0
    for i in range(len(states)):
        if state[0] <= states[i][0]:
            break
    states.insert(i, state)


def decode_fits(states: list[State], cur_rem_tokens: int) -> bool:
    """The check's loop: ``cur_rem_tokens`` (``remaining_current`` less the request's paged input) with what
    the requests finished before have freed must hold every later request's decode, less the reserve."""
    freed, count = 0, len(states)
    for i, (tokens_left, tokens_occupied) in enumerate(states):
        batch = count - i
        if cur_rem_tokens + freed - tokens_left * batch <= IGNORE_EOS_RESERVE_TOKENS * batch:
            return False
        freed += tokens_occupied
    return True
