"""hybridcache's command line. Each command parses its options and calls the library; nothing else.

Bad input (a TraceError, a bad option or parameter, an unreadable file) prints one message naming
file:line:field on stderr and exits with status 2; outputs are written atomically, so a failed command
leaves no partial file behind. Every option's help and default come from what it configures (the knob
schema for knobs and pools: ``sim/cli_options.py``); ``trace`` is in ``sim/trace_commands.py``.
"""
from __future__ import annotations

from pathlib import Path

import click

from sim.cache.policies import policy_names
from sim.cache.policy import CLI_KNOBS
from sim.cli_interrupts import Interrupted, InterruptibleGroup, interrupt_on_sigterm, signal_of
from sim.cli_options import (
    TRACE_INPUT,
    InputError,
    call_library,
    format_option,
    option,
    pool_options,
    pools_as_config,
    spec_options,
)
from sim.config import POOL_KNOBS
from sim.cost import GPUS
from sim.models import MODELS
from sim.trace import load_trace
from sim.trace_commands import trace


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from sim.code_version import code_identity, describe_code

    click.echo(f"hybridcache {describe_code(code_identity())}")
    ctx.exit()


@click.group(cls=InterruptibleGroup)
@option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="print the version, the source hash and git's description of this checkout, then exit")
def cli() -> None:
    """hybridcache: prefix-cache reuse and pool occupancy of hybrid-model serving policies."""


# ---- simulate and the seed experiments ---------------------------------------------------------------
_POLICY_HELP = "the cache policy preset (`cli.py policies` lists them and what each models)"
_MODEL_HELP = "the model preset: layer kinds, window, state sizes (sim/models.py)"
_GPU_HELP = "the GPU preset of the cost model (sim/cost.py)"
_MODE_HELP = "timed: the SimPy engine with batching and time; replay: requests one after another, no time"
_CALIBRATION_HELP = "fitted cost coefficients (`cli.py calibrate`) instead of the GPU preset's roofline"


def _knob_options(fn):
    """The policy knobs every simulation command takes (not given: the preset's value)."""
    return spec_options(CLI_KNOBS, preset_default=True)(fn)


@cli.command()
@option("--trace", "trace_path", required=True, type=TRACE_INPUT,
              help="the JSONL trace (plain, gzip or zstd; - for standard input)")
@option("--policy", default="sglang-retain", show_default=True, type=click.Choice(policy_names()),
              help=_POLICY_HELP)
@option("--model", default="inkling", show_default=True, type=click.Choice(sorted(MODELS)), help=_MODEL_HELP)
@option("--gpu", default="h200", show_default=True, type=click.Choice(sorted(GPUS)), help=_GPU_HELP)
@_knob_options
@pool_options()
@option("--calibration", type=click.Path(exists=True, dir_okay=False), show_default="none",
              help=_CALIBRATION_HELP)
@option("--compare", "compare_policy", type=click.Choice(policy_names()), show_default="none",
              help="a second policy on the same trace, side by side with the change")
@option("--out", "out_dir", type=click.Path(file_okay=False), show_default="nothing written",
              help="write the request and step tables and summary.json here (with --compare: one set per "
                   "policy, named requests.POLICY.csv)")
@option("--table-format", default="csv", show_default=True, type=click.Choice(["csv", "parquet"]),
              help="the tables --out writes (parquet needs pyarrow: pip install -e '.[parquet]')")
@format_option()
@option("--mode", default="timed", show_default=True, type=click.Choice(["timed", "replay"]), help=_MODE_HELP)
@option("--bounds/--no-bounds", default=True, show_default=True,
        help="the offline bounds beside the result (Belady, optimal admission: docs/bounds.md); they take about "
             "as long again as the simulation")
def simulate(trace_path, policy, model, gpu, calibration, compare_policy, out_dir, table_format, fmt, mode,
             bounds, **options):
    """Replay a trace through a policy in the SimPy engine: reuse and why tokens were recomputed, pool
    occupancy against capacity, predicted latencies. `python cli.py policies` describes the presets."""
    from reports.simulate_cli import run_simulate
    from sim.simulate import SimConfig
    from sim.trace_io import display_name

    loaded = call_library(load_trace, trace_path)
    config = call_library(SimConfig, policy=policy, model=model, gpu=gpu,
                          knobs={k: options[k] for k in CLI_KNOBS}, calibration=calibration, mode=mode,
                          bounds=bounds, **pools_as_config({k: options[k] for k in POOL_KNOBS}))
    click.echo(call_library(run_simulate, loaded, config, compare_policy, out_dir, fmt, display_name(trace_path),
                            table_format))


@cli.command()
@click.argument("name", type=click.Choice(["s1", "s2", "s3", "real-multiturn", "vllm-short-prompt", "vllm-align",
                                           "vllm-retention", "marconi"]))
@option("--trigger", default="tokens", show_default=True, type=click.Choice(["tokens", "iterations"]),
              help="s1: SGLang's SWA freeing trigger")
@option("--prompt-len-jitter", default=0, show_default=True, type=click.IntRange(min=0),
              help="s1: prompt lengths vary by +-this many tokens (the seed's prompts were not all 3000)")
@option("--trace", "trace_path", type=TRACE_INPUT, show_default="traces/mooncake_conversation_500.jsonl",
              help="real-multiturn: an imported trace (trace import mooncake ...); marconi: a multi-turn trace "
                   "(default: 48 synthetic chat sessions of 8 turns)")
@option("--cache-gb", "cache_gb", default="2,5,10,20", show_default=True, metavar="GB1,GB2,..",
              help="marconi: the byte budgets (KV and MAMBA states together), one row each")
@option("--large-kv-gb", default=3000.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="real-multiturn: the KV budget of the large pools (the default pools have 40 GB)")
@option("--pairs", "pair_names", default="sglang,freetoken", show_default=True,
              help="real-multiturn: policy pairs to run (sglang: sglang -> sglang-retain; freetoken: "
                   "freetoken -> freetoken-lazy)")
@option("--mode", default="timed", show_default=True, type=click.Choice(["timed", "replay"]),
              help="real-multiturn, marconi: " + _MODE_HELP)
@format_option(("text", "md"), "the tables are")
def experiment(name, trigger, prompt_len_jitter, trace_path, cache_gb, large_kv_gb, pair_names, mode, fmt):
    """Run a seed experiment of SPEC section 7, or a vLLM one (its public reports), and print its table in
    the seed's shape; real-multiturn runs the seeds' policy pairs on a real trace's conversations; marconi
    compares Marconi with its vLLM+ and SGLang+ baselines over byte budgets (docs/seed-experiments.md)."""
    from reports.tables import markdown
    from sim import experiments, experiments_vllm

    if name == "real-multiturn":
        from reports.real_multiturn_cli import run_real_multiturn

        sample = Path(__file__).resolve().parent / "traces" / "mooncake_conversation_500.jsonl"
        click.echo(call_library(run_real_multiturn, trace_path or str(sample), large_kv_gb, pair_names, mode,
                                fmt == "md"))
        return
    if name == "marconi":
        from sim.marconi_experiment import marconi_experiment, parse_sizes

        loaded = call_library(load_trace, trace_path) if trace_path else None
        table = call_library(marconi_experiment, loaded, call_library(parse_sizes, cache_gb), mode=mode)
    elif name == "s1":
        table = call_library(experiments.s1, trigger=trigger, prompt_len_jitter=prompt_len_jitter)
    elif name.startswith("vllm-"):
        table = call_library(getattr(experiments_vllm, name.removeprefix("vllm-").replace("-", "_")))
    else:
        table = call_library(getattr(experiments, name))
    click.echo(markdown(table) if fmt == "md" else table.to_string(index=False))


# ---- grids and reports (sim/grid/, reports/) ---------------------------------------------------------
def _grid_axis_options(fn):
    """One comma-list option per grid axis: every simulate knob and pool option (sim/grid/axes.py)."""
    from sim.grid.axes import AXES

    for axis in reversed(AXES):
        fn = option(axis.flag, axis.name, metavar="V1,V2,..", show_default=axis.default_text,
                          help=f"{axis.help}; a comma list")(fn)
    return fn


@cli.command()
@option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), show_default="none",
              help="a TOML grid file: axes as lists (page_size = [64, 128]) and trace, out, mode, calibration, "
                   "jobs; options given here add to it (an axis in both is an error)")
@option("--trace", "trace_path", type=TRACE_INPUT, show_default="the grid file's",
              help="the JSONL trace every point simulates")
@_grid_axis_options
@option("--mode", type=click.Choice(["timed", "replay"]), show_default="timed", help=_MODE_HELP)
@option("--calibration", type=click.Path(exists=True, dir_okay=False), show_default="none",
              help=_CALIBRATION_HELP)
@option("--out", "out_dir", type=click.Path(file_okay=False), show_default="the grid file's",
              help="the result store (points/, failed/, grid.csv)")
@option("--jobs", type=click.IntRange(min=1), show_default="one per core",
              help="worker processes, or a private Ray's CPUs")
@option("--ray", "ray_address", is_flag=False, flag_value="local", metavar="[ADDRESS]", show_default="no Ray",
              help="run points as Ray tasks on the cluster at ADDRESS (no address: a private local Ray)")
@option("--keep-old", is_flag=True, default=False, show_default=True,
              help="keep points an older code computed for the same inputs instead of recomputing them "
                   "(report warns about the mix)")
@option("--table-format", default="csv", show_default=True, type=click.Choice(["csv", "parquet"]),
              help="grid.csv, and with parquet also grid.parquet (needs pyarrow)")
@click.pass_context
def grid(ctx, config_path, trace_path, mode, calibration, out_dir, jobs, ray_address, keep_old, table_format,
         **axis_texts):
    """Simulate every combination of the comma-list knobs, one stored result per point; a rerun skips
    finished points computed by the same code (a code change recomputes them). Exit status 1 when some
    point failed (each is printed with its configuration)."""
    from sim.grid.axes import expand, parse_axes
    from sim.grid.config_file import merge_grid_file
    from sim.grid.sweep import describe_interrupted, describe_run, run_grid
    from sim.trace_io import STDIN, save_stdin

    given = {"trace": trace_path, "out": out_dir, "mode": mode, "calibration": calibration, "jobs": jobs}
    settings, axis_texts = call_library(merge_grid_file, config_path, given, axis_texts)
    configs = call_library(expand, call_library(parse_axes, axis_texts), settings["calibration"], settings["mode"])
    trace_path = settings["trace"]
    if trace_path == STDIN:  # the workers read the trace by path: keep a copy in the store
        trace_path = call_library(save_stdin, settings["out"], check=load_trace)
    with interrupt_on_sigterm():
        try:
            run = call_library(run_grid, trace_path, configs, settings["out"], settings["jobs"], ray_address,
                               keep_old=keep_old)
        except KeyboardInterrupt as e:
            raise Interrupted(describe_interrupted(settings["out"]), signal_of(e)) from None
    if table_format == "parquet":
        from sim.tables_io import write_table

        call_library(write_table, run.table, Path(settings["out"]) / "grid", "parquet")
    click.echo(describe_run(run))
    ctx.exit(1 if run.failed else 0)


@cli.command()
@click.argument("out_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@option("--baseline", show_default="the grid's first policy",
              help="the policy every other is compared with")
@option("--format", "fmt", default="md", show_default=True, type=click.Choice(["md", "html", "png"]),
              help="md: DIR/report.md + figures/*.png; html: one self-contained DIR/report.html; png: figures")
@option("--points", metavar="KEY,..", show_default="the baseline's and one other policy's first point",
              help="points whose pool occupancy is drawn (keys or unique prefixes)")
def report(out_dir, baseline, fmt, points):
    """Heatmaps, pool occupancy, cost of retention and seed-style tables of a `grid` sweep in DIR."""
    from reports.report import write_report

    chosen = [p.strip() for p in points.split(",")] if points is not None else None
    written = call_library(write_report, out_dir, baseline, fmt, chosen)
    for warning in written.warnings:
        click.echo(f"warning: {warning}", err=True)
    for path in written.paths:
        click.echo(f"wrote {path}")


@cli.command()
@option("--model", default="inkling", show_default=True, type=click.Choice(sorted(MODELS)),
              help="the model the window, scan chunk and checkpoint grids are resolved against")
def policies(model):
    """The policy presets: the engine or PR each one models, its rules module and every knob's value."""
    from sim.cache.engines import ENGINES
    from sim.cache.policies import PRESETS
    from sim.cache.policy import describe_resolved
    from sim.cache.resolve import resolve
    from sim.config import SimConfig

    for name, preset in PRESETS.items():
        click.echo(f"{name:<20} {preset.about}")
        line = describe_resolved(resolve(preset, MODELS[model]))
        engine_line = getattr(ENGINES[preset.engine], "describe_resolved", None)
        if engine_line is not None:  # vLLM: not a radix tree; its block size and groups come from the GPU
            line = line.split("; resolved:")[0] + "; " + engine_line(preset, MODELS[model], SimConfig.gpu)
        click.echo(f"{'':<20} {line}")


@cli.command()
@click.argument("engine", type=click.Choice(["sglang", "freetoken", "vllm"]))
@option("--scenarios", "num_scenarios", default=20, show_default=True, type=click.IntRange(min=1),
              help="seeded scenarios per pressure setting")
@option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="the first scenario's seed")
@option("--pressure/--no-pressure", default=None, show_default="both",
              help="only scenarios whose pools force eviction, or only those with large pools")
@option("--preset", "presets", multiple=True, show_default="every preset the engine's driver models",
              help="only this preset (repeatable)")
@option("--mode", "modes", type=click.Choice(["replay", "timed"]), multiple=True, show_default="both",
              help="simulate's mode to compare (repeatable)")
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
# the executor's own pool defaults: small enough for the tiny model's tensors on a CPU
EXECUTOR_POOLS = {"pool_tokens": 200_000, "mamba_states": 256}


def _executor_options(fn):
    options = [
        option("--trace", "trace_path", required=True, type=TRACE_INPUT,
                     help="the JSONL trace (plain, gzip or zstd; - for standard input)"),
        option("--policy", default="sglang-retain", show_default=True, type=click.Choice(policy_names()),
                     help=_POLICY_HELP),
        option("--model", default="tiny", show_default=True, type=click.Choice(["tiny", "tiny-swa", "small"]),
                     help="the executor's model: tiny and tiny-swa for a CPU, small for a GPU"),
        option("--device", default="cpu", show_default=True, type=click.Choice(["cpu", "cuda"]),
                     help="where the model runs (cpu: Triton under its interpreter)"),
        option("--kernels", default="triton", show_default=True, type=click.Choice(["triton", "torch"]),
                     help="the Triton kernels or their plain-torch references"),
        option("--gpu", type=click.Choice(sorted(GPUS)), show_default="cpu on cpu, h200 on cuda",
                     help="the cost model's preset the measured times are set beside"),
        option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**63 - 1),
               help="seed of the model's random weights"),
    ]
    for decorate in reversed(options):
        fn = decorate(fn)
    return _knob_options(pool_options(**EXECUTOR_POOLS)(fn))


def _executor_config(policy, model, device, gpu, calibration, options):
    import os

    from sim.simulate import SimConfig

    if device == "cpu":  # the Triton kernels run under the interpreter; it must be on before they load
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return SimConfig(policy=policy, model=model, gpu=gpu or ("cpu" if device == "cpu" else "h200"),
                     knobs={k: options[k] for k in CLI_KNOBS}, calibration=calibration,
                     **pools_as_config({k: options[k] for k in POOL_KNOBS}))


@cli.command()
@_executor_options
@option("--calibration", type=click.Path(exists=True, dir_okay=False), show_default="none",
              help=_CALIBRATION_HELP)
@option("--out", "out_dir", type=click.Path(file_okay=False), show_default="nothing written",
              help="write requests, steps, bitwise.csv and timings.csv here")
@option("--table-format", default="csv", show_default=True, type=click.Choice(["csv", "parquet"]),
              help="the request and step tables --out writes")
@format_option(("text", "json"))
def execute(trace_path, policy, model, device, kernels, gpu, seed, calibration, out_dir, table_format, fmt,
            **options):
    """Run a trace through the real executor beside the simulator's prediction: every request's outputs
    against a replay from scratch, bit for bit (0 requests not bit-exact for a correct policy), measured
    vs predicted step time, throughput."""
    config = call_library(_executor_config, policy, model, device, gpu, calibration, options)
    loaded = call_library(load_trace, trace_path)
    from executor.report import execute_report

    click.echo(call_library(execute_report, loaded, config, device, kernels, seed, out_dir, fmt == "json",
                            table_format))


@cli.command()
@_executor_options
@option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="the calibration JSON to write")
def calibrate(trace_path, policy, model, device, kernels, gpu, seed, output, **options):
    """Fit the cost model's coefficients to the executor's measured step times; `simulate --calibration`
    and `execute --calibration` read the file."""
    config = call_library(_executor_config, policy, model, device, gpu, None, options)
    loaded = call_library(load_trace, trace_path)
    from executor.report import calibrate_from_run

    click.echo(call_library(calibrate_from_run, loaded, config, device, kernels, seed, output))


cli.add_command(trace)

if __name__ == "__main__":
    cli()
