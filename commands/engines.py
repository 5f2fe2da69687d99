"""`policies` and `conformance`: what each preset models, and the engines' own cache code against the simulator."""

from __future__ import annotations

import click

from commands.options import (
    InputError,
    option,
)
from commands.param_types import Integer
from sim.cache.engines.sglang_knobs import SCHEDULE_POLICIES
from sim.models import MODELS


@click.command()
@option(
    "--model",
    default="inkling",
    show_default=True,
    type=click.Choice(sorted(MODELS)),
    help="the model the window, scan chunk and checkpoint grids are resolved against",
)
def policies(model):
    """The policy presets: the engine or PR each one models, its rules module and every knob's value."""
    from sim.engines.registry import PRESETS, engine_of
    from sim.run.config import SimConfig

    for name, preset in PRESETS.items():
        click.echo(f"{name:<20} {preset.about}")
        line = engine_of(preset).describe(preset, MODELS[model], SimConfig.gpu)
        click.echo(f"{'':<20} {line}")


@click.command()
@click.argument("engine", type=click.Choice(["sglang", "freetoken", "vllm"]))
@option(
    "--scenarios",
    "num_scenarios",
    default=20,
    show_default=True,
    type=Integer(min=1),
    help="seeded scenarios per pressure setting",
)
@option("--seed", default=0, show_default=True, type=Integer(min=0), help="the first scenario's seed")
@option(
    "--pressure/--no-pressure",
    default=None,
    show_default="both",
    help="only scenarios whose pools force eviction, or only those with large pools",
)
@option(
    "--preset",
    "presets",
    multiple=True,
    show_default="every preset the engine's driver models",
    help="only this preset (repeatable)",
)
@option(
    "--mode",
    "modes",
    type=click.Choice(["replay", "timed"]),
    multiple=True,
    show_default="both",
    help="simulate's mode to compare (repeatable)",
)
@option(
    "--concurrent",
    is_flag=True,
    help="many requests in flight: the engine's own scheduler and simulate on a step clock, compared step by step",
)
@option(
    "--spaced",
    is_flag=True,
    help="one request at a time on the step clock: every step's chunks and pools compared (conformance/spaced.py)",
)
@option(
    "--boundary",
    is_flag=True,
    help="step by step, lengths, windows and pools at the rules' boundaries, ties, many requests "
    "(conformance/generate_boundary.py)",
)
@option(
    "--overlap/--no-overlap",
    default=None,
    show_default="as each scenario draws it",
    help="with --concurrent/--spaced/--boundary: force the engine's overlap loop (vLLM: async scheduling) on or off",
)
@option(
    "--schedule-policy",
    type=click.Choice(SCHEDULE_POLICIES),
    default=None,
    show_default="as each scenario draws it",
    help="with --concurrent/--spaced/--boundary, SGLang only: force --schedule-policy on every scenario",
)
@option(
    "--mixed-chunk/--no-mixed-chunk",
    default=None,
    show_default="as each scenario draws it",
    help="with --concurrent/--spaced/--boundary, SGLang only: force --enable-mixed-chunk on every scenario",
)
@option(
    "--no-cache",
    is_flag=True,
    help="with --concurrent/--spaced/--boundary, SGLang only: its --disable-radix-cache on every scenario, "
    "compared with the no-cache preset",
)
@click.pass_context
def conformance(
    ctx,
    engine,
    num_scenarios,
    seed,
    pressure,
    presets,
    modes,
    concurrent,
    spaced,
    boundary,
    overlap,
    schedule_policy,
    mixed_chunk,
    no_cache,
):
    """Drive ENGINE's own cache code (installed with the conformance extras) on seeded scenarios and compare
    each request's cached tokens with `simulate` (with --concurrent: every step's batch and pools too); exit 1
    when anything disagrees."""
    from conformance.suite import EngineMissing, report, run_suite

    pressures = (False, True) if pressure is None else (pressure,)
    forced = {
        "overlap": overlap,
        "schedule_policy": schedule_policy,
        "mixed_chunk": mixed_chunk,
        "disable_radix_cache": True if no_cache else None,
    }
    if concurrent or spaced or boundary:
        seeds = range(seed, seed + num_scenarios)
        family = "spaced" if spaced else "boundary" if boundary else "concurrent"
        _concurrent(ctx, engine, seeds, pressures, tuple(presets) or None, family, forced)
        return
    given = [name for name, value in forced.items() if value is not None]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise InputError(f"{flags}: only with --concurrent, --spaced or --boundary (the step-clock runs)")
    try:
        result = run_suite(
            engine,
            range(seed, seed + num_scenarios),
            pressures,
            tuple(presets) or None,
            tuple(modes) or ("replay", "timed"),
        )
    except EngineMissing as e:
        raise InputError(str(e)) from e
    click.echo(report(result))
    ctx.exit(0 if result.all_equal else 1)


def _concurrent(
    ctx, engine: str, seeds: range, pressures: tuple, presets: tuple | None, family: str, forced: dict
) -> None:
    from conformance.generate_boundary import generate_boundary
    from conformance.generate_concurrent import generate_concurrent
    from conformance.modes import forced as forced_modes
    from conformance.spaced import generate_spaced
    from conformance.suite import EngineMissing, driver
    from conformance.suite_steps import report_steps, run_concurrent

    drawn = {"spaced": generate_spaced, "boundary": generate_boundary}.get(family, generate_concurrent)
    try:
        make = forced_modes(drawn, engine, forced)
    except ValueError as e:
        raise InputError(str(e)) from e
    try:
        module = driver(engine, concurrent=True)
    except EngineMissing as e:
        raise InputError(str(e)) from e
    result = run_concurrent(module, seeds, pressures, presets, make)
    click.echo(report_steps(result))
    ctx.exit(0 if result.all_equal else 1)
