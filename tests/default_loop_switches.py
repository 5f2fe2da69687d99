"""What the default loop's switch tests share: a generated burst run as ``no-cache`` or ``radix``, and runs with a
switch on and off compared by their tables and by what they retracted (victim, reason, count), each also counting
what its test needs counted."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from unittest import mock

from hypothesis import strategies as st

from sim.run.simulate import SimConfig, simulate
from sim.sched.default import DefaultScheduler
from tests.same_runs import same_both_ways
from tests.test_capped_stalls import bursts

_RETRACT = DefaultScheduler._retract


def burst_config(knobs: dict, pool_tokens: int, bounds: bool, policy: str = "no-cache") -> SimConfig:
    """A burst's run on the ``inkling`` model with 48 Mamba states (few enough that admissions wait on them)."""
    return SimConfig(
        policy=policy, model="inkling", knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )


def policy_bursts() -> st.SearchStrategy:
    """``(trace, config, fast_path)``: a generated burst (``test_capped_stalls.bursts``) as ``no-cache`` or
    ``radix``, in the fast loop or step by step."""
    drawn = st.tuples(bursts(), st.sampled_from(["no-cache", "radix"]), st.booleans())
    return drawn.map(lambda d: (d[0][0], burst_config(*d[0][1:], policy=d[1]), d[2]))


def logging_retractions(retracted: list[tuple[str, str, int]]):
    """A patch of ``DefaultScheduler._retract`` that appends each victim's id, the reason and its retraction count
    (before this one) to ``retracted``, then retracts."""

    def retract(scheduler: DefaultScheduler, victim, why: str) -> None:
        retracted.append((victim.request_id, why, victim.num_retractions))
        _RETRACT(scheduler, victim, why)

    return mock.patch.object(DefaultScheduler, "_retract", autospec=True, side_effect=retract)


def switched_both_ways(
    switch: tuple[object, str],
    trace,
    config: SimConfig,
    fast_path: bool,
    counting: Callable[[list[int]], AbstractContextManager] | None = None,
) -> tuple[tuple, tuple]:
    """The run with ``switch`` (module, name) on and off, held the same by ``same_both_ways``; each run is
    ``(retractions, result, count)``, the count what ``counting`` (a patch made from a one-item counter) counted."""

    def run(on: bool) -> tuple:
        retracted: list[tuple[str, str, int]] = []
        count = [0]
        with ExitStack() as patches:
            patches.enter_context(mock.patch.object(switch[0], switch[1], on))
            patches.enter_context(logging_retractions(retracted))
            if counting is not None:
                patches.enter_context(counting(count))
            return retracted, simulate(trace, config, fast_path=fast_path), count[0]

    return same_both_ways(run)
