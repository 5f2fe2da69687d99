"""hybridcache's command line. Each command parses its options and calls the library; nothing else.

Bad input (a TraceError, a bad option or parameter, an unreadable file) prints one message naming
file:line:field on stderr and exits with status 2; outputs are written atomically, so a failed command
leaves no partial file behind.
"""
from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path

import click

from sim.cache.knobs import NONE, KnobSpec
from sim.cache.policies import policy_names
from sim.cache.policy import CLI_KNOBS
from sim.config import POOL_KNOBS
from sim.cost import GPUS
from sim.models import MODELS
from sim.trace import Trace, load_trace, write_trace
from sim.trace_formats import IMPORT_FORMATS
from sim.trace_gen import GENERATORS
from sim.trace_stats import trace_stats

# a trace or dataset to read: a file (plain, gzip or zstd) or - for standard input
_TRACE_INPUT = click.Path(exists=True, dir_okay=False, allow_dash=True)


class InputError(click.ClickException):
    """Bad user input: exit status 2, like click's own usage errors."""

    exit_code = 2


def call_library(fn: Callable, *args, **kwargs):
    """Run a library call, turning bad-input exceptions into an InputError."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, OSError) as e:  # TraceError is a ValueError
        raise InputError(str(e)) from e


@click.group()
def cli() -> None:
    """hybridcache: prefix-cache reuse and pool occupancy of hybrid-model serving policies."""


@cli.group()
def trace() -> None:
    """Generate, import and inspect request traces (JSONL, README "Trace format")."""


@trace.group()
def gen() -> None:
    """Generate a trace: fan-out, multi-turn, or one of the seed experiments S1-S3."""


def _option_for(param: inspect.Parameter, hint: object) -> click.Option:
    flag = "--" + param.name.replace("_", "-")
    # click treats an explicit default=None as a default, so a required option gets none at all
    given = {"required": True} if param.default is inspect.Parameter.empty else {"default": param.default}
    if typing.get_origin(hint) is typing.Literal:
        return click.Option([flag], type=click.Choice(typing.get_args(hint)), show_default=True, **given)
    if hint is bool:
        return click.Option([f"{flag}/--no-{flag[2:]}"], show_default=True, **given)
    return click.Option([flag], type=hint, show_default=True, **given)


def _generator_command(name: str, generator: Callable[..., Trace]) -> click.Command:
    """A `trace gen NAME` command whose options are the generator's parameters."""
    hints = typing.get_type_hints(generator)
    params = [_option_for(p, hints[p.name]) for p in inspect.signature(generator).parameters.values()]
    params.append(click.Option(["-o", "--output"], required=True, type=click.Path(dir_okay=False),
                               help="the JSONL trace to write"))

    def run(output: str, **kwargs: object) -> None:
        call_library(write_trace, call_library(generator, **kwargs), output)

    return click.Command(name, params=params, callback=run, help=inspect.getdoc(generator))


for _name, _generator in GENERATORS.items():
    gen.add_command(_generator_command(_name, _generator))


@trace.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(list(IMPORT_FORMATS)))
@click.argument("src", type=_TRACE_INPUT)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="the JSONL trace to write")
@click.option("--limit", type=click.IntRange(min=1), help="import only the first N requests (conversations)")
@click.option("--chains/--no-chains", default=None, help="mooncake: infer multi-turn follow-ups [chains]")
@click.option("--whole-output-only", is_flag=True, default=None,
              help="mooncake: a follow-up must hold its parent's whole output")
@click.option("--min-match-blocks", type=click.IntRange(min=1), help="mooncake: whole blocks a follow-up must match [2]")
@click.option("--prefix-groups", type=int, help="azure: number of shared system prompts [8]")
@click.option("--shared-len", type=int, help="azure: tokens of each shared system prompt [512]")
@click.option("--seed", type=int, help="azure: seed of the group assignment; datasets: of the arrivals [0]")
@click.option("--chars-per-token", type=float, help="datasets: characters per estimated token [4]")
@click.option("--request-rate", type=float, help="datasets: conversations (openai-jsonl: requests) per second [1]")
@click.option("--think-time", type=float, help="datasets: seconds between a turn's end and the next turn [0]")
@click.option("--output-len", type=click.IntRange(min=1),
              help="datasets: output tokens of a turn without a recorded reply [256; sglang-agentic: 220]")
@click.option("--max-turns", type=click.IntRange(min=1), help="datasets: user turns kept per conversation")
def import_(fmt: str, src: str, output: str, limit: int | None, **options) -> None:
    """Convert a public trace or benchmark dataset to hybridcache's format and say what it holds.
    FORMAT: mooncake, azure, sharegpt (ShareGPT or vLLM benchmarks/multi_turn JSON), sglang-agentic,
    openai-jsonl (SGLang bench_serving datasets); SRC may be gzip or zstd, or - for standard input."""
    from sim.import_cli import misplaced_options, run_import

    given = {k: v for k, v in options.items() if v is not None}
    wrong = misplaced_options(fmt, given)
    if wrong:
        raise click.UsageError(f"--{wrong[0].replace('_', '-')} does not apply to {fmt}")
    click.echo(call_library(run_import, fmt, src, output, limit, given))


@trace.command("stats")
@click.argument("path", type=_TRACE_INPUT)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of a table")
def stats(path: str, as_json: bool) -> None:
    """Sizes, sharing structure and ideal (infinite FULL cache, page 1) reuse of a trace."""
    result = trace_stats(call_library(load_trace, path))
    if as_json:
        click.echo(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("statistic", "value", title=path)
    for key, value in result.items():
        table.add_row(key, _format_value(value))
    Console().print(table)


def _format_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
    return str(value)


# ---- simulate and the seed experiments ---------------------------------------------------------------
class KnobType(click.ParamType):
    """A knob's value, parsed and checked by its schema (``sim/cache/knobs.py``)."""

    def __init__(self, spec: KnobSpec):
        self.spec = spec
        self.name = "|".join("none" if c is None else c for c in spec.choices) if spec.choices else (
            spec.kind.__name__.upper() + ("|none" if spec.nullable else ""))

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        try:
            return self.spec.parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


def _spec_options(specs, defaults: dict | None = None):
    """One option per knob of ``specs`` (help, unit, range from the schema); ``defaults`` per command."""
    defaults = defaults or {}

    def decorate(fn):
        for spec in reversed(list(specs.values())):
            default = defaults.get(spec.name)
            fn = click.option(spec.flag, spec.name, type=KnobType(spec), default=default,
                              show_default=default is not None, help=spec.describe())(fn)
        return fn

    return decorate


def _knob_options(fn):
    """The policy knobs every simulation command takes (not given: the preset's value)."""
    return _spec_options(CLI_KNOBS)(fn)


def _pools(values: dict) -> dict:
    """Pool options as SimConfig fields ("none": derived, as when not given)."""
    return {name: None if value == NONE else value for name, value in values.items()}


@cli.command()
@click.option("--trace", "trace_path", required=True, type=_TRACE_INPUT)
@click.option("--policy", default="sglang-retain", show_default=True, type=click.Choice(policy_names()))
@click.option("--model", default="inkling", show_default=True, type=click.Choice(sorted(MODELS)))
@click.option("--gpu", default="h200", show_default=True, type=click.Choice(sorted(GPUS)))
@_knob_options
@_spec_options(POOL_KNOBS, {"kv_memory_gb": 40.0, "swa_full_tokens_ratio": 0.8, "mamba_full_memory_ratio": 0.9})
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False), help="fitted cost coefficients")
@click.option("--compare", "compare_policy", type=click.Choice(policy_names()), help="a second policy, side by side")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="write requests.csv and steps.csv here")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of tables")
@click.option("--mode", default="timed", show_default=True, type=click.Choice(["timed", "replay"]),
              help="timed: the SimPy engine with batching and time; replay: requests one after another")
def simulate(trace_path, policy, model, gpu, calibration, compare_policy, out_dir, as_json, mode, **options):
    """Replay a trace through a policy in the SimPy engine: reuse, pool occupancy, predicted time.
    `python cli.py policies` describes the presets."""
    from sim.simulate import SimConfig
    from sim.simulate_cli import run_simulate
    from sim.trace_io import display_name

    loaded = call_library(load_trace, trace_path)
    config = call_library(SimConfig, policy=policy, model=model, gpu=gpu,
                          knobs={k: options[k] for k in CLI_KNOBS}, calibration=calibration, mode=mode,
                          **_pools({k: options[k] for k in POOL_KNOBS}))
    click.echo(call_library(run_simulate, loaded, config, compare_policy, out_dir, as_json,
                            display_name(trace_path)))


@cli.command()
@click.argument("name", type=click.Choice(["s1", "s2", "s3", "real-multiturn", "marconi"]))
@click.option("--trigger", default="tokens", show_default=True, type=click.Choice(["tokens", "iterations"]),
              help="s1: SGLang's SWA freeing trigger")
@click.option("--prompt-len-jitter", default=0, show_default=True, type=click.IntRange(min=0),
              help="s1: prompt lengths vary by +-this many tokens (the seed's prompts were not all 3000)")
@click.option("--trace", "trace_path", type=_TRACE_INPUT,
              help="real-multiturn: an imported trace (trace import mooncake ...) [traces/mooncake_conversation_500.jsonl]; "
                   "marconi: a multi-turn trace [48 synthetic chat sessions of 8 turns]")
@click.option("--cache-gb", "cache_gb", default="2,5,10,20", show_default=True, metavar="GB1,GB2,..",
              help="marconi: the byte budgets (KV and MAMBA states together), one row each")
@click.option("--large-kv-gb", default=3000.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="real-multiturn: the KV budget of the large pools (the default pools have 40 GB)")
@click.option("--pairs", "pair_names", default="sglang,freetoken", show_default=True,
              help="real-multiturn: policy pairs to run (sglang: sglang -> sglang-retain; freetoken: "
                   "freetoken -> freetoken-lazy)")
@click.option("--mode", default="timed", show_default=True, type=click.Choice(["timed", "replay"]),
              help="real-multiturn, marconi: the SimPy engine with time, or requests one after another")
@click.option("--markdown", "as_markdown", is_flag=True, help="print a markdown table")
def experiment(name, trigger, prompt_len_jitter, trace_path, cache_gb, large_kv_gb, pair_names, mode, as_markdown):
    """Run a seed experiment of SPEC section 7 and print its table in the seed's shape; real-multiturn
    runs the seeds' policy pairs on a real trace's conversations; marconi compares Marconi with its vLLM+
    and SGLang+ baselines over byte budgets (docs/seed-experiments.md)."""
    from reports.tables import markdown
    from sim import experiments

    if name == "real-multiturn":
        from sim.real_multiturn_cli import run_real_multiturn

        sample = Path(__file__).resolve().parent / "traces" / "mooncake_conversation_500.jsonl"
        click.echo(call_library(run_real_multiturn, trace_path or str(sample), large_kv_gb, pair_names, mode,
                                as_markdown))
        return
    if name == "marconi":
        from sim.marconi_experiment import marconi_experiment, parse_sizes

        loaded = call_library(load_trace, trace_path) if trace_path else None
        table = call_library(marconi_experiment, loaded, call_library(parse_sizes, cache_gb), mode=mode)
    elif name == "s1":
        table = call_library(experiments.s1, trigger=trigger, prompt_len_jitter=prompt_len_jitter)
    else:
        table = call_library(getattr(experiments, name))
    click.echo(markdown(table) if as_markdown else table.to_string(index=False))


# ---- grids and reports (sim/grid/, reports/) ---------------------------------------------------------
def _grid_axis_options(fn):
    """One comma-list option per grid axis: every simulate knob and pool option (sim/grid/axes.py)."""
    from sim.grid.axes import AXES

    for axis in reversed(AXES):
        fn = click.option(axis.flag, axis.name, metavar="V1,V2,..", help=f"{axis.help}; a comma list")(fn)
    return fn


@cli.command()
@click.option("--trace", "trace_path", required=True, type=_TRACE_INPUT)
@_grid_axis_options
@click.option("--mode", default="timed", show_default=True, type=click.Choice(["timed", "replay"]))
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False), help="fitted cost coefficients")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="the result store")
@click.option("--jobs", type=click.IntRange(min=1), help="worker processes, or a private Ray's CPUs [cores]")
@click.option("--ray", "ray_address", is_flag=False, flag_value="local", metavar="[ADDRESS]",
              help="run points as Ray tasks on the cluster at ADDRESS (no address: a private local Ray)")
@click.pass_context
def grid(ctx, trace_path, mode, calibration, out_dir, jobs, ray_address, **axis_texts):
    """Simulate every combination of the comma-list knobs, one stored result per point; a rerun skips
    finished points. Exit status 1 when some point failed (each is printed with its configuration)."""
    from sim.grid.axes import expand, parse_axes
    from sim.grid.sweep import describe_run, run_grid
    from sim.trace_io import STDIN, save_stdin

    configs = call_library(expand, call_library(parse_axes, axis_texts), calibration, mode)
    if trace_path == STDIN:  # the workers read the trace by path: keep a copy in the store
        trace_path = call_library(save_stdin, out_dir)
    run = call_library(run_grid, trace_path, configs, out_dir, jobs, ray_address)
    click.echo(describe_run(run))
    ctx.exit(1 if run.failed else 0)


@cli.command()
@click.argument("out_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@click.option("--baseline", help="the policy every other is compared with [the grid's first]")
@click.option("--format", "fmt", default="md", show_default=True, type=click.Choice(["md", "html", "png"]),
              help="md: DIR/report.md + figures/*.png; html: one self-contained DIR/report.html; png: figures")
@click.option("--points", metavar="KEY,..", help="points whose pool occupancy is drawn (keys or unique prefixes)")
def report(out_dir, baseline, fmt, points):
    """Heatmaps, pool occupancy, cost of retention and seed-style tables of a `grid` sweep in DIR."""
    from reports.report import write_report

    chosen = [p.strip() for p in points.split(",")] if points is not None else None
    for path in call_library(write_report, out_dir, baseline, fmt, chosen):
        click.echo(str(path))

@cli.command()
@click.option("--model", default="inkling", show_default=True, type=click.Choice(sorted(MODELS)),
              help="the model the window, scan chunk and checkpoint grids are resolved against")
def policies(model):
    """The policy presets: the engine or PR each one models, its rules module and every knob's value."""
    from sim.cache.policies import PRESETS
    from sim.cache.policy import describe_resolved, resolve

    for name, preset in PRESETS.items():
        click.echo(f"{name:<20} {preset.about}")
        click.echo(f"{'':<20} {describe_resolved(resolve(preset, MODELS[model]))}")


@cli.command()
@click.argument("engine", type=click.Choice(["sglang", "freetoken", "vllm"]))
@click.option("--scenarios", "num_scenarios", default=20, show_default=True, type=click.IntRange(min=1),
              help="seeded scenarios per pressure setting")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="the first scenario's seed")
@click.option("--pressure/--no-pressure", default=None,
              help="only scenarios whose pools force eviction, or only those with large pools [both]")
@click.option("--preset", "presets", multiple=True, help="only this preset (repeatable) [every preset the "
                                                         "engine's driver models]")
@click.option("--mode", "modes", type=click.Choice(["replay", "timed"]), multiple=True,
              help="simulate's mode to compare (repeatable) [both]")
@click.pass_context
def conformance(ctx, engine, num_scenarios, seed, pressure, presets, modes):
    """Drive ENGINE's own cache code (installed with the conformance extras) on seeded scenarios and compare
    each request's cached tokens with `simulate`; exit 1 when any request disagrees."""
    from conformance.suite import EngineMissing, report, run_suite

    pressures = (False, True) if pressure is None else (pressure,)
    try:
        result = run_suite(engine, range(seed, seed + num_scenarios), pressures, tuple(presets) or None,
                           tuple(modes) or ("replay", "timed"))
    except EngineMissing as e:
        raise InputError(str(e)) from e
    click.echo(report(result))
    ctx.exit(0 if result.all_equal else 1)


# ---- the executor ----------------------------------------------------------------------------------------
def _executor_options(fn):
    options = [
        click.option("--trace", "trace_path", required=True, type=_TRACE_INPUT),
        click.option("--policy", default="sglang-retain", show_default=True, type=click.Choice(policy_names())),
        click.option("--model", default="tiny", show_default=True, type=click.Choice(["tiny", "tiny-swa", "small"])),
        click.option("--device", default="cpu", show_default=True, type=click.Choice(["cpu", "cuda"])),
        click.option("--kernels", default="triton", show_default=True, type=click.Choice(["triton", "torch"])),
        click.option("--gpu", type=click.Choice(sorted(GPUS)), help="cost preset [cpu on cpu, h200 on cuda]"),
        click.option("--seed", default=0, show_default=True, type=int, help="seed of the model's random weights"),
        click.option("--pool-tokens", default=200_000, show_default=True, type=click.IntRange(min=1)),
        click.option("--swa-pool-tokens", type=click.IntRange(min=0)),
        click.option("--mamba-states", default=256, show_default=True, type=click.IntRange(min=2)),
        click.option("--cache-bytes", type=click.FloatRange(min=0, min_open=True),
                     help="one byte budget for KV and MAMBA states together (marconi policies)"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return _knob_options(fn)


def _executor_config(policy, model, device, gpu, pool_tokens, swa_pool_tokens, mamba_states, calibration, knobs,
                     cache_bytes=None):
    import os

    from sim.simulate import SimConfig

    if device == "cpu":  # the Triton kernels run under the interpreter; it must be on before they load
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return SimConfig(policy=policy, model=model, gpu=gpu or ("cpu" if device == "cpu" else "h200"),
                     knobs={k: knobs[k] for k in CLI_KNOBS}, pool_tokens=pool_tokens,
                     swa_pool_tokens=swa_pool_tokens, mamba_states=mamba_states, calibration=calibration,
                     cache_bytes=cache_bytes)


@cli.command()
@_executor_options
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False), help="fitted cost coefficients")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="write requests.csv, steps.csv, bitwise.csv and timings.csv here")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def execute(trace_path, policy, model, device, kernels, gpu, seed, pool_tokens, swa_pool_tokens, mamba_states,
            cache_bytes, calibration, out_dir, as_json, **knobs):
    """Run a trace through the real executor beside the simulator's prediction: every request's outputs
    against a replay from scratch, bit for bit (0 requests not bit-exact for a correct policy), measured
    vs predicted step time, throughput."""
    config = _executor_config(policy, model, device, gpu, pool_tokens, swa_pool_tokens, mamba_states,
                              calibration, knobs, cache_bytes)
    loaded = call_library(load_trace, trace_path)
    from executor.report import execute_report

    click.echo(call_library(execute_report, loaded, config, device, kernels, seed, out_dir, as_json))


@cli.command()
@_executor_options
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="the calibration JSON")
def calibrate(trace_path, policy, model, device, kernels, gpu, seed, pool_tokens, swa_pool_tokens, mamba_states,
              cache_bytes, output, **knobs):
    """Fit the cost model's coefficients to the executor's measured step times; `simulate --calibration`
    and `execute --calibration` read the file."""
    config = _executor_config(policy, model, device, gpu, pool_tokens, swa_pool_tokens, mamba_states, None, knobs,
                              cache_bytes)
    loaded = call_library(load_trace, trace_path)
    from executor.report import calibrate_from_run

    click.echo(call_library(calibrate_from_run, loaded, config, device, kernels, seed, output))


if __name__ == "__main__":
    cli()
