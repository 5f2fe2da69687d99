"""The concurrent check's own parts, without an engine: the first difference of two step-by-step runs, the
seeded concurrent scenarios (pure, within their ranges, arriving at whole steps), and simulate's step clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.compare_steps import simulated_steps
from conformance.generate_concurrent import SHAPES, generate_concurrent
from conformance.scenario import arrival_steps
from conformance.trajectory import Served, Step, Trajectory, first_difference, same_outcome


def _run(*steps: Step, **requests: Served) -> Trajectory:
    return Trajectory(tuple(steps), dict(requests))


STEPS = (Step(0, (("a", 16, True),), ((10, 0),)), Step(1, (("a", 1, False),), ((9, 1),)))
DONE = {"a": Served(0, True, 2)}


def test_equal_runs_have_no_difference():
    assert first_difference(_run(*STEPS, **DONE), _run(*STEPS, **DONE)) is None


@pytest.mark.parametrize(
    "changed, what",
    [
        (Step(1, (("a", 1, False),), ((8, 1),)), "pools"),
        (Step(1, (("a", 2, False),), ((9, 1),)), "batch"),
        (Step(1, (("a", 1, False),), ((9, 1),), ("a",)), "retracted"),
        (Step(2, (("a", 1, False),), ((9, 1),)), "step clock"),
    ],
)
def test_the_first_differing_step_names_what_differs(changed, what):
    difference = first_difference(_run(*STEPS, **DONE), _run(STEPS[0], changed, **DONE))
    assert (difference.at, difference.what) == (1, what)
    assert "step 1" in difference.describe()


def test_a_missing_step_and_a_request_outcome_are_differences_too():
    assert first_difference(_run(*STEPS, **DONE), _run(STEPS[0], **DONE)).what == "steps"
    other = {"a": Served(0, True, 3)}
    difference = first_difference(_run(*STEPS, **DONE), _run(*STEPS, **other))
    assert (difference.at, difference.what, difference.request_id) == (None, "finished_at", "a")


def test_a_refusal_worded_differently_is_the_same_outcome():
    # each side words its refusal its own way: only served, cached tokens and the finish step are compared
    refused = Served(0, False, None, "aborted: Out of memory")
    assert same_outcome(refused, refused._replace(note="aborted at position 640: check_decode_mem fails"))
    assert not same_outcome(refused, refused._replace(served=True, finished_at=3))
    assert first_difference(_run(*STEPS, a=refused), _run(*STEPS, a=refused._replace(note="other"))) is None


def test_concurrent_scenarios_are_pure_and_stay_in_their_ranges():
    shapes = set()
    for seed in range(40):
        scenario = generate_concurrent("freetoken", seed, pressure=seed % 2 == 1)
        assert scenario == generate_concurrent("freetoken", seed, pressure=seed % 2 == 1)
        trace = scenario.trace()
        assert 2 <= len(trace) <= 40
        steps = arrival_steps(scenario)
        assert steps == sorted(steps) and all(step >= 0 for step in steps)
        assert all(trace.prompt_len(r.id) <= 32768 + 400 * 4 for r in trace)
        shapes.add(scenario.kind)
    assert shapes == {f"concurrent-{shape}" for shape in SHAPES}


def test_freetoken_scenarios_keep_freetokens_own_pool_floors():
    # four requests decode at once: four GDN slots each, and the SWA footprint of four (its _swa_pool_floor)
    for seed in range(30):
        config = generate_concurrent("freetoken", seed, pressure=True).config
        if config.has_mamba:
            assert config.mamba_states >= 16
        if config.has_swa:
            assert config.swa_tokens >= 4 * (
                config.window + 16 + config.window + config.swa_eviction_interval + 2
            )


def test_simulate_counts_steps_on_the_step_clock():
    # a burst at step 0: every step starts on a whole unit, one after another while there is work
    scenario = next(
        s
        for s in (generate_concurrent("freetoken", seed) for seed in range(20))
        if s.kind == "concurrent-burst"
    )
    run = simulated_steps(scenario, "freetoken")
    assert run.steps[0].at == min(arrival_steps(scenario))
    assert all(later.at > earlier.at for earlier, later in zip(run.steps, run.steps[1:], strict=False))
    finished = [served.finished_at for served in run.requests.values() if served.served]
    assert max(finished) == run.steps[-1].at + 1


def test_a_forced_mode_replaces_only_the_knob_it_names():
    # the generator draws as always (same requests, same pools); only the chosen knobs change, and the rerun
    # line names them
    from conformance.modes import forced, rerun_flags

    make = forced(
        generate_concurrent, "sglang", {"overlap": False, "schedule_policy": "lpm", "mixed_chunk": None}
    )
    drawn_flags = set()
    for seed in range(5):
        drawn, changed = generate_concurrent("sglang", seed, True), make("sglang", seed, True)
        assert changed.trace_lines == drawn.trace_lines
        assert changed.config == replace(drawn.config, overlap=False, schedule_policy="lpm")
        mixed = " --mixed-chunk" if drawn.config.mixed_chunk else ""  # as drawn: not forced
        assert rerun_flags(changed.config) == " --no-overlap --schedule-policy lpm" + mixed
        drawn_flags.add(rerun_flags(drawn.config))
        defaults = replace(drawn.config, overlap=True, schedule_policy="fcfs", mixed_chunk=False)
        assert rerun_flags(defaults) == ""
    assert len(drawn_flags) > 1  # the family draws SGLang's modes (conformance/generate_knobs.py)
    assert forced(generate_concurrent, "vllm", {"overlap": None}) is generate_concurrent


def test_an_sglang_mode_on_another_engine_is_refused_by_name():
    from conformance.modes import forced

    with pytest.raises(ValueError, match="--mixed-chunk: only SGLang"):
        forced(generate_concurrent, "vllm", {"mixed_chunk": True})


def test_the_cli_refuses_a_mode_without_a_step_clock_run():
    from click.testing import CliRunner

    from commands.main import cli as main

    result = CliRunner().invoke(main, ["conformance", "sglang", "--schedule-policy", "lpm", "--scenarios", "1"])
    assert result.exit_code != 0 and "--schedule-policy: only with --concurrent, --spaced or --boundary" in result.output
    result = CliRunner().invoke(main, ["conformance", "freetoken", "--concurrent", "--mixed-chunk"])
    assert result.exit_code != 0 and "--mixed-chunk: only SGLang has this knob, not freetoken" in result.output
