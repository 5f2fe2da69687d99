"""A freeing stretch's FULL ids taken in one ``alloc`` (switch ``swa_free_runs.FULL_ONCE``) and handed out slice by
slice with each turn's SWA ids: nothing in a stretch frees a FULL page, so the ids each request gets, and every id
each pool hands out, in order, are those of an ``alloc`` at each turn (off, the reference). ``test_swa_free_runs.py``'s
generated ``no-cache`` bursts and its logs (the ids each pool hands out, ``SwaFreed`` where listened, the tables);
each run also logs the FULL and SWA ids every request holds after each stretch, and the switch-on run must make
fewer FULL ``alloc`` calls where a stretch started pages on more than one turn, so the property is not met by a
switch that does nothing."""

from __future__ import annotations

import pytest
from hypothesis import example, given

from sim.cache import swa_free_runs
from sim.cache.components import FULL
from sim.cache.pools import Pool
from tests import test_swa_free_runs as swa_free_runs_test
from tests.same_runs import same_both_ways
from tests.test_swa_free_runs import PAGE_16_ITERATIONS, PAGE_64, STRETCH_RUNS, bursts, run_logged

_TAKE_FREEING, _POOL_ALLOC = swa_free_runs.take_freeing_decodes, Pool.alloc

# patches take_freeing_decodes, Pool.alloc and module flags, which the compiled core binds
pytestmark = pytest.mark.interpreted


def once_both_ways(burst, monkeypatch) -> int:
    """The run with the switch on and off held the same; how many fewer FULL ``alloc`` calls the switch-on run made."""

    def run(on: bool) -> tuple:
        held: list = []
        calls = [0]

        def take_freeing(manager, reqs, *args):
            freed = _TAKE_FREEING(manager, reqs, *args)
            held.append([(req.request_id, list(req.own_full), list(req.own_swa)) for req in reqs])
            return freed

        def counted_alloc(pool: Pool, count: int) -> list[int]:
            calls[0] += pool.component == FULL
            return _POOL_ALLOC(pool, count)

        monkeypatch.setattr(swa_free_runs, "FULL_ONCE", on)
        # run_logged's own patches call these through its module's names
        monkeypatch.setattr(swa_free_runs_test, "POOL_ALLOC", counted_alloc)
        monkeypatch.setattr(swa_free_runs_test, "TAKE_FREEING", take_freeing)
        logs, result, _ = run_logged(burst, True, monkeypatch)
        return [*logs, held], result, calls[0]

    on, off = same_both_ways(run)
    assert on[2] <= off[2]
    return off[2] - on[2]


@STRETCH_RUNS
@given(burst=bursts())
@example(burst=PAGE_64)
@example(burst=PAGE_16_ITERATIONS)
def test_one_full_alloc_a_stretch_hands_out_the_same_ids(burst, monkeypatch):
    once_both_ways(burst, monkeypatch)


@pytest.mark.parametrize("burst", [PAGE_64, PAGE_16_ITERATIONS])
def test_the_fixed_bursts_take_fewer_full_allocs(burst, monkeypatch):
    assert once_both_ways(burst, monkeypatch) > 10
