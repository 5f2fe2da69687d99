"""`simulate` and `experiment`: one trace through one policy, and the seed experiments (docs/seed-experiments.md)."""

from __future__ import annotations

from pathlib import Path

import click

from commands.common import (
    CALIBRATION_HELP,
    GPU_HELP,
    MODE_HELP,
    MODEL_HELP,
    POLICY_HELP,
    SLO_HELP,
    config_from_options,
    knob_option_names,
    knob_options,
)
from commands.options import (
    TRACE_INPUT,
    PolicyChoice,
    call_library,
    call_with_options,
    format_option,
    option,
    pool_options,
)
from commands.param_types import Integer, Number, OutputDir
from commands.preflight import require_table_format, writable_dir
from sim.cost import GPUS
from sim.models import MODELS
from sim.trace import load_trace


@click.command()
@option(
    "--trace",
    "trace_path",
    required=True,
    type=TRACE_INPUT,
    help="the JSONL trace (plain, gzip or zstd; - for standard input)",
)
@option(
    "--policy",
    default="sglang-retain",
    show_default=True,
    type=PolicyChoice(),
    help=POLICY_HELP,
)
@option("--model", default="inkling", show_default=True, type=click.Choice(sorted(MODELS)), help=MODEL_HELP)
@option("--gpu", default="h200", show_default=True, type=click.Choice(sorted(GPUS)), help=GPU_HELP)
@knob_options
@pool_options()
@option(
    "--calibration", type=click.Path(exists=True, dir_okay=False), show_default="none", help=CALIBRATION_HELP
)
@option(
    "--compare",
    "compare_policy",
    type=PolicyChoice(),
    show_default="none",
    help="a second policy on the same trace, side by side with the change",
)
@option(
    "--out",
    "out_dir",
    type=OutputDir(),
    show_default="nothing written",
    help="write the request and step tables and summary.json here (with --compare: one set per "
    "policy, named requests.POLICY.csv)",
)
@option(
    "--table-format",
    default="csv",
    show_default=True,
    type=click.Choice(["csv", "parquet"]),
    help="the tables --out writes (parquet needs pyarrow: pip install -e '.[parquet]')",
)
@format_option()
@option("--mode", default="timed", show_default=True, type=click.Choice(["timed", "replay"]), help=MODE_HELP)
@option("--slo", metavar="ttft=S,tpot=S", show_default="none", help=SLO_HELP)
@option(
    "--bounds/--no-bounds",
    default=True,
    show_default=True,
    help="the offline bounds beside the result (Belady, optimal admission: docs/bounds.md); they take about "
    "as long again as the simulation",
)
def simulate(
    trace_path,
    policy,
    model,
    gpu,
    calibration,
    compare_policy,
    out_dir,
    table_format,
    fmt,
    mode,
    slo,
    bounds,
    **options,
):
    """Replay a trace through a policy in the SimPy engine: reuse and why tokens were recomputed, pool
    occupancy against capacity, predicted latencies. `python cli.py policies` describes the presets."""
    from commands.simulate_print import run_simulate
    from sim.run.simulate import SimConfig
    from sim.trace.files import display_name

    if out_dir is not None:  # before the run: a run must not end in a refusal known at its start
        call_library(require_table_format, table_format)
        call_library(writable_dir, out_dir, "--out")
    loaded = call_library(load_trace, trace_path)
    config = call_with_options(
        knob_option_names(),
        SimConfig,
        policy=policy,
        model=model,
        gpu=gpu,
        calibration=calibration,
        mode=mode,
        bounds=bounds,
        slo=slo,
        **config_from_options(options),
    )
    click.echo(
        call_with_options(
            knob_option_names(),
            run_simulate,
            loaded,
            config,
            compare_policy,
            out_dir,
            fmt,
            display_name(trace_path),
            table_format,
        )
    )


@click.command()
@click.argument(
    "name",
    type=click.Choice(
        ["s1", "s2", "s3", "real-multiturn", "vllm-short-prompt", "vllm-align", "vllm-retention", "marconi"]
    ),
)
@option(
    "--trigger",
    default="tokens",
    show_default=True,
    type=click.Choice(["tokens", "iterations"]),
    help="s1: SGLang's SWA freeing trigger",
)
@option(
    "--prompt-len-jitter",
    default=0,
    show_default=True,
    type=Integer(min=0),
    help="s1: prompt lengths vary by +-this many tokens (the seed's prompts were not all 3000)",
)
@option(
    "--trace",
    "trace_path",
    type=TRACE_INPUT,
    show_default="traces/mooncake_conversation_500.jsonl",
    help="real-multiturn: an imported trace (trace import mooncake ...); marconi: a multi-turn trace "
    "(default: 48 synthetic chat sessions of 8 turns)",
)
@option(
    "--cache-gb",
    "cache_gb",
    default="2,5,10,20",
    show_default=True,
    metavar="GB1,GB2,..",
    help="marconi: the byte budgets (KV and MAMBA states together), one row each",
)
@option(
    "--large-kv-gb",
    default=3000.0,
    show_default=True,
    type=Number(min=0, min_open=True),
    help="real-multiturn: the KV budget of the large pools (the default pools have 40 GB)",
)
@option(
    "--pairs",
    "pair_names",
    default="sglang,freetoken",
    show_default=True,
    help="real-multiturn: policy pairs to run (sglang: sglang -> sglang-retain; freetoken: "
    "freetoken -> freetoken-lazy)",
)
@option(
    "--mode",
    default="timed",
    show_default=True,
    type=click.Choice(["timed", "replay"]),
    help="real-multiturn, marconi: " + MODE_HELP,
)
@format_option(("text", "md"), "the tables are")
def experiment(name, trigger, prompt_len_jitter, trace_path, cache_gb, large_kv_gb, pair_names, mode, fmt):
    """Run a seed experiment (S1-S3, docs/seed-experiments.md), or a vLLM one (its public reports), and print its table in
    the seed's shape; real-multiturn runs the seeds' policy pairs on a real trace's conversations; marconi
    compares Marconi with its vLLM+ and SGLang+ baselines over byte budgets (docs/seed-experiments.md)."""
    from reports.tables import markdown
    from sim.experiments import seeds as experiments
    from sim.experiments import vllm as experiments_vllm

    if name == "real-multiturn":
        from commands.real_multiturn_print import run_real_multiturn

        sample = Path(__file__).resolve().parents[1] / "traces" / "mooncake_conversation_500.jsonl"
        click.echo(
            call_library(
                run_real_multiturn, trace_path or str(sample), large_kv_gb, pair_names, mode, fmt == "md"
            )
        )
        return
    if name == "marconi":
        from sim.experiments.marconi import marconi_experiment, parse_sizes

        loaded = call_library(load_trace, trace_path) if trace_path else None
        table = call_library(marconi_experiment, loaded, call_library(parse_sizes, cache_gb), mode=mode)
    elif name == "s1":
        table = call_library(experiments.s1, trigger=trigger, prompt_len_jitter=prompt_len_jitter)
    elif name.startswith("vllm-"):
        table = call_library(getattr(experiments_vllm, name.removeprefix("vllm-").replace("-", "_")))
    else:
        table = call_library(getattr(experiments, name))
    click.echo(markdown(table) if fmt == "md" else table.to_string(index=False))
