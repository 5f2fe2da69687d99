"""The SGLang loop's token clock (``sim/sched/sglang_clock.py``) counts launched batches only where the schedule
policy reads it (``hrrn``): with ``UNREAD_SKIPPED`` on and off, generated bursts on the presets of SGLang's loop,
under every modelled schedule policy, are the same runs (tables and summaries); a ``hrrn`` run's clock still
counts, and another policy's is never asked."""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.engines.sglang_knobs import SCHEDULE_POLICIES
from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_clock
from sim.sched.sglang_clock import TokenClock
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests
from tests.same_runs import same_both_ways


@st.composite
def bursts(draw):
    """Requests arriving together, more than a small chunk budget admits at once, so that several wait."""
    policy = draw(st.sampled_from(["radix", "sglang", "sglang-retain", "marconi-sglang"]))
    page = 1 if policy == "marconi-sglang" else draw(st.sampled_from([1, 16]))
    knobs = dict(
        page_size=page,
        chunked_prefill_size=max(page, 16) * draw(st.integers(4, 32)),
        max_running_requests=draw(st.integers(2, 8)),
        overlap=draw(st.booleans()),
        schedule_policy=draw(st.sampled_from(SCHEDULE_POLICIES)),
    )
    if policy != "radix":
        knobs.update(track_interval=max(page, 16) * draw(st.integers(1, 4)))
    model = "qwen3-next" if policy == "radix" else "inkling"
    requests = burst_requests(draw, draw(st.integers(3, 8)), 1200, 40, 30)
    trace = Trace(sorted(requests, key=lambda r: r.arrival))
    return trace, SimConfig(policy=policy, model=model, knobs=knobs, pool_tokens=8000, mamba_states=48)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(bursts())
def test_a_clock_no_policy_reads_changes_no_run(case):
    trace, config = case
    launched, waited = TokenClock.launched, TokenClock.waited

    def run(on: bool):
        counted = {"launched": 0, "waited": 0}

        def counting(clock, batch):
            launched(clock, batch)
            counted["launched"] += bool(clock.processed)

        def asked(clock, request_id):
            counted["waited"] += 1
            return waited(clock, request_id)

        with (
            mock.patch.object(sglang_clock, "UNREAD_SKIPPED", on),
            mock.patch.object(TokenClock, "launched", counting),
            mock.patch.object(TokenClock, "waited", asked),
        ):
            return (), simulate(trace, config), counted

    on, _ = same_both_ways(run)
    if config.knobs["schedule_policy"] == "hrrn":
        assert on[2]["launched"]  # hrrn's clock counts with the switch on
    else:
        assert not on[2]["launched"] and not on[2]["waited"]  # never counted, never asked
