"""vLLM's why watcher is not told the eviction or skip of a block only its own request can hold
(``sim/cache/blocks/private.py``, switch ``UNWATCHES_PRIVATE``): the request and step tables (the why column in
them) and the summary equal the reference's, where every eviction and skip is told.

Generated traces: fan-outs, multi-turn chats (a turn quotes the last one's output, less dropped reasoning) and
mixed prompts of shared refs, refs of their own and quoted outputs in any order (a private run in the middle of a
prompt); models with SWA, Mamba or both, retention intervals that skip blocks, async scheduling, pools from a few
dozen blocks (evictions, refusals, preemptions in timed mode) to roomy; replay and timed. Floors on fixed cases:
a fan-out whose private blocks are evicted and not told, a multi-turn run where a later hit reads a shared block's
eviction (an ``evicted`` cause in the why column), a timed run with preemptions."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

import sim.run.simulate as simulate_module
from sim.cache.blocks import private
from sim.cache.blocks.layout import policy_layout
from sim.engines.registry import make_policy
from sim.models import get_model
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from sim.trace.generate import fanout, multiturn
from sim.trace.records import Request, Segment

MODELS = ("inkling", "tiny", "tiny-swa", "gemma-4-26b-a4b")


def mixed(requests: list) -> Trace:
    """Request i: its segments (("s", k, n): shared ref k's first n tokens; ("o", n): a ref of its own; ("q", j,
    skip): request j's output from ``skip`` on, sent after j) and its output length."""
    built: list[Request] = []
    for index, (segments, output_len) in enumerate(requests):
        prompt, after = [], None
        for number, segment in enumerate(segments):
            if segment[0] == "s":
                prompt.append(Segment(ref=f"shared{segment[1]}", len=segment[2]))
            elif segment[0] == "o" or not index:  # the first request quotes no output: its own ref
                prompt.append(Segment(ref=f"own-r{index}-{number}", len=1 + segment[-1] % 200))
            else:
                quoted = built[segment[1] % index]
                prompt.append(Segment(output_of=quoted.id, skip=segment[2] % quoted.output_len))
                after = quoted.id
        timing = {"after": after} if after else {"arrival": 0.01 * index}
        built.append(Request(id=f"r{index}", prompt=prompt, output_len=output_len, **timing))
    return Trace(built, path="<mixed>")


def build(trace_spec) -> Trace:
    kind, params = trace_spec
    if kind == "fanout":
        return fanout(*params)
    if kind == "multiturn":
        sessions, turns, system, user, output, drop = params
        return multiturn(sessions, turns, system, user, output, drop_reasoning=drop % output)
    return mixed(params)


segment = st.one_of(
    st.tuples(st.just("s"), st.integers(0, 2), st.integers(1, 300)),
    st.tuples(st.just("o"), st.integers(0, 199)),
    st.tuples(st.just("q"), st.integers(0, 9), st.integers(0, 400)),
)
mixed_request = st.tuples(st.lists(segment, min_size=1, max_size=4), st.integers(1, 200))
traces = st.one_of(
    st.tuples(
        st.just("fanout"),
        st.tuples(
            st.integers(1, 3),
            st.integers(2, 8),
            st.integers(1, 400),
            st.integers(1, 100),
            st.integers(1, 150),
        ),
    ),
    st.tuples(
        st.just("multiturn"),
        st.tuples(
            st.integers(1, 4),
            st.integers(1, 4),
            st.integers(1, 300),
            st.integers(1, 100),
            st.integers(1, 150),
            st.integers(0, 40),
        ),
    ),
    st.tuples(
        st.just("mixed"),
        st.lists(mixed_request, min_size=1, max_size=12),
    ),
)


def config_of(config_spec) -> SimConfig:
    """The run a drawn ``configs()`` spec names: ``vllm`` on a generated trace, bounds off."""
    mode, model, knobs, pool_tokens = config_spec
    return SimConfig(
        policy="vllm", model=model, mode=mode, bounds=False, knobs=dict(knobs), pool_tokens=pool_tokens
    )


@st.composite
def configs(draw):
    model = draw(st.sampled_from(MODELS))
    block = policy_layout(get_model(model), make_policy("vllm")).block_size  # the scheduler block
    knobs = {
        "async_scheduling": draw(st.booleans()),
        "retention_interval": draw(st.sampled_from([None, 0, block, 3 * block])),
    }
    return draw(st.sampled_from(["replay", "timed"])), model, knobs, draw(st.integers(1000, 5000))


def run_seen_at_end(trace_spec, config_spec, monkeypatch, at_end) -> tuple:
    """The run, ``at_end(manager, watcher)`` called as it ends, where the pool's integrity is checked (a block
    marked private is hashed)."""
    run_over = simulate_module._run_over

    def ended(manager, watcher):
        manager.check_integrity()
        at_end(manager, watcher)
        return run_over(manager, watcher)

    monkeypatch.setattr(simulate_module, "_run_over", ended)
    result = simulate(build(trace_spec), config_of(config_spec))
    monkeypatch.setattr(simulate_module, "_run_over", run_over)
    return (), result


def both_ways_or_skip(run) -> tuple:
    """``same_both_ways(run)``'s switch-on run; a pool that cannot hold one max_model_len request (both runs
    refuse alike) skips the example."""
    try:
        on, _ = same_both_ways(run)
    except ValueError:
        pytest.skip("refused")
    return on


def watched(trace_spec, config_spec, unwatches: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; ``seen`` gets the watcher's recorded entries as the run ends."""
    monkeypatch.setattr(private, "UNWATCHES_PRIVATE", unwatches)

    def counted(manager, watcher):
        if watcher is not None:
            evicted = sum(map(len, watcher.evicted.values()))
            seen[unwatches] = (evicted, sum(map(len, watcher.skipped.values())) + watcher.num_unsorted)

    return run_seen_at_end(trace_spec, config_spec, monkeypatch, counted)


def same_runs(trace_spec, config_spec, monkeypatch) -> tuple[dict, object]:
    """Both runs, held equal; the entries each recorded (True: the switch on), and the run."""
    seen: dict = {}
    on = both_ways_or_skip(lambda on: watched(trace_spec, config_spec, on, monkeypatch, seen))
    assert seen[True][0] <= seen[False][0] and seen[True][1] <= seen[False][1]
    return seen, on[1]


PRIVATE_EVICTED = (("fanout", (2, 12, 200, 40, 60)), ("replay", "inkling", {}, 2000))
SHARED_EVICTED = (("multiturn", (3, 4, 200, 48, 60, 0)), ("timed", "inkling", {}, 4000))
PREEMPTED = (("fanout", (2, 8, 300, 60, 200)), ("timed", "tiny-swa", {"async_scheduling": True}, 2000))
# r0's shared ref ends inside a block: the block before it is shared, evicted under r1-r3 and read by r4's hit
# (its FULL answer stops there: ``full_evicted``); a cut one block early leaves that eviction out
EDGE_EVICTED = (
    (
        "mixed",
        [([("s", 0, 200), ("o", 99)], 50)]
        + [([("s", 1, 300), ("o", 99)], 50)] * 3
        + [([("s", 0, 200), ("o", 49)], 50)],
    ),
    ("replay", "inkling", {}, 2100),
)
# retention 176 on tiny-swa: r0's SWA keeps blocks 7-10 (a segment's tail) and skips block 11, the last shared
# one; r1's window before 192 misses block 11 alone, read as skipped (``retention``); a skip cut one block early
# leaves it out
EDGE_SKIPPED = (
    ("mixed", [([("s", 0, 200), ("o", 99)], 50), ([("s", 0, 200), ("o", 49)], 50)]),
    ("replay", "tiny-swa", {"retention_interval": 176}, 20000),
)
SKIPPED = (("multiturn", (2, 4, 100, 40, 50, 7)), ("replay", "inkling", {"retention_interval": 0}, 6000))


def on_fixed_and_generated(max_examples: int, *cases):
    """A property over the fixed ``cases`` (trace and config specs) and generated ones, each run given its
    function-scoped ``monkeypatch``."""

    def wrap(test):
        test = given(trace_spec=traces, config_spec=configs())(test)
        for trace_spec, config_spec in reversed(cases):
            test = example(trace_spec=trace_spec, config_spec=config_spec)(test)
        health = [HealthCheck.function_scoped_fixture]
        return settings(max_examples=max_examples, deadline=None, suppress_health_check=health)(test)

    return wrap


def reached(same_runs, trace_spec, config_spec, monkeypatch):
    """``same_runs``' answer, or None where the run is refused (a Hypothesis event counts it)."""
    try:
        return same_runs(trace_spec, config_spec, monkeypatch)
    except pytest.skip.Exception:
        event("refused")
        return None


FIXED = (PRIVATE_EVICTED, SHARED_EVICTED, PREEMPTED, SKIPPED)  # the later properties' fixed cases


@on_fixed_and_generated(150, *FIXED, EDGE_EVICTED, EDGE_SKIPPED)
def test_private_blocks_unwatched_leave_the_runs_as_the_reference(trace_spec, config_spec, monkeypatch):
    if (runs := reached(same_runs, trace_spec, config_spec, monkeypatch)) is None:
        return
    seen, result = runs
    event(
        f"evictions {'left out' if seen[True][0] < seen[False][0] else 'all told' if seen[True][0] else 'none'}"
    )
    event(
        f"skips {'left out' if seen[True][1] < seen[False][1] else 'all told' if seen[True][1] else 'none'}"
    )
    event(f"preempted {bool(result.requests['retractions'].sum())}, {trace_spec[0]} {config_spec[0]}")


def test_the_fixed_cases_reach_what_they_hold(monkeypatch):
    """A private block's eviction left out; a shared one's read by a later hit; preemptions; skips left out; the
    last shared block's eviction read by a later hit, and its skip."""
    seen, _ = same_runs(*PRIVATE_EVICTED, monkeypatch)
    assert seen[True][0] < seen[False][0], seen
    seen, result = same_runs(*SHARED_EVICTED, monkeypatch)
    assert seen[True][0] > 0 and result.requests["why"].str.contains("evicted").any(), seen
    assert result.requests["retractions"].sum() > 0  # a preempted turn admitted again, not classified again
    seen, result = same_runs(*PREEMPTED, monkeypatch)
    assert result.requests["retractions"].sum() > 0 and seen[True][0] < seen[False][0], seen
    seen, _ = same_runs(*SKIPPED, monkeypatch)
    assert 0 < seen[True][1] < seen[False][1], seen
    seen, result = same_runs(*EDGE_EVICTED, monkeypatch)
    assert result.requests["why"].iloc[-1].startswith("full_evicted"), result.requests["why"].iloc[-1]
    seen, result = same_runs(*EDGE_SKIPPED, monkeypatch)
    assert result.requests["why"].iloc[-1].startswith("retention [176,192)"), result.requests["why"].iloc[-1]
