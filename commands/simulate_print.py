"""What ``cli.py simulate`` prints and writes: the header and figures (text, markdown or JSON), the compare
view, and the request / step tables (CSV or Parquet)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from reports.simulate_header import Run
from reports.simulate_view import render_markdown, render_text
from sim.run.metrics import compare, served_apart
from sim.run.resolved import resolved_config
from sim.run.setup import RunSetup, build
from sim.run.simulate import SimConfig, SimResult, simulate
from sim.run.slo import parse_slo
from sim.run.tables_io import check_table_outputs, write_tables
from sim.sched.request import served_mask
from sim.trace import Trace

FORMATS = ("text", "md", "json")
TABLE_FORMATS = ("csv", "parquet")


def run_simulate(
    trace: Trace,
    config: SimConfig,
    compare_policy: str | None,
    out_dir: str | None,
    fmt: str = "text",
    trace_name: str = "trace",
    table_format: str = "csv",
) -> str:
    if compare_policy == config.policy:
        raise ValueError(f"--compare {compare_policy} is the policy already simulated; name another policy")
    if fmt not in FORMATS or table_format not in TABLE_FORMATS:
        raise ValueError(
            f"format must be one of {', '.join(FORMATS)} and table format one of "
            f"{', '.join(TABLE_FORMATS)}, got {fmt!r} and {table_format!r}"
        )
    if out_dir:
        check_table_outputs(out_dir, [p for p in (config.policy, compare_policy) if p], table_format)
    configs = [config] + ([dataclasses.replace(config, policy=compare_policy)] if compare_policy else [])
    setups = [build(c) for c in configs]  # both refused now, if either must be: not after the first run
    results = [_run(trace, c, setup) for c, setup in zip(configs, setups, strict=True)]
    written = (
        write_tables(results[0], out_dir, results[1] if compare_policy else None, table_format)
        if out_dir
        else []
    )
    if fmt == "json":
        return json.dumps(payload(results, trace_name))
    runs = [Run(r.config.policy, r.summary, resolved_config(r.setup), r.setup.pool_layout()) for r in results]
    title = (
        " vs ".join(r.policy for r in runs)
        + f" on {_shown_path(trace_name, fmt)}: {len(trace):,} requests, model "
        f"{config.model}, GPU {config.gpu}, {config.mode} mode"
        + (f", arrivals x{config.request_rate_scale:g}" if config.request_rate_scale != 1 else "")
        + (f"; SLO {parse_slo(config.slo).describe()}" if config.slo else "")
    )
    render = render_markdown if fmt == "md" else render_text
    text = render(runs, title, config.mode == "timed")
    text += "".join(rejection_note(r, fmt, len(results) > 1) for r in results)
    if len(results) == 2:
        text += compare_note(results, fmt)
    if written and fmt != "md":
        text += "\n\nwrote " + ", ".join(str(path) for path in written)
    return text


def _shown_path(name: str, fmt: str) -> str:
    """The trace as a title names it: a markdown title (pasted into a pull request) or an absolute path shows
    the file's name alone, no local folders."""
    return Path(name).name if fmt == "md" or Path(name).is_absolute() else name


def payload(results: list[SimResult], trace_name: str) -> dict:
    """The JSON object: trace, configuration as given and as resolved, pools, summary; the compared run
    under ``compare`` with the improved / regressed counts."""

    def one(result: SimResult) -> dict:
        resolved = resolved_config(result.setup)
        return {
            "policy": result.config.policy,
            "config": dataclasses.asdict(result.config),
            "resolved": resolved,
            "pools": resolved["pools"],
            "summary": result.summary.as_dict(),
        }

    out = {"trace": trace_name, **one(results[0])}
    if len(results) == 2:
        base, other = results[0].requests, results[1].requests
        out["compare"] = one(results[1]) | compare(base, other) | served_apart(base, other)
    return out


def rejection_note(result: SimResult, fmt: str = "text", named: bool = False) -> str:
    """Name the requests the pools could never hold (the first few, with why); ``named``: say whose run."""
    rejected = result.requests[~served_mask(result.requests)]
    if rejected.empty:
        return ""
    shown = "; ".join(f"{row.id}: {row.rejected}" for row in rejected.head(3).itertuples())
    whose = f" under {result.config.policy}" if named else ""
    return (
        f"\n\n{'**NOTE**' if fmt == 'md' else '  NOTE'}: {len(rejected)} request(s) never ran{whose}, "
        f"e.g. {shown}"
    )


def compare_note(results: list[SimResult], fmt: str) -> str:
    """Improved / regressed among the requests both served; those only one served, apart."""
    base, other = results[0].config.policy, results[1].config.policy
    changes = compare(results[0].requests, results[1].requests)
    apart = served_apart(results[0].requests, results[1].requests)
    text = (
        f"\n\n{'' if fmt == 'md' else '  '}improved / regressed requests ({base} -> {other}, of the "
        f"{apart['served_by_both']:,} both served): {changes['improved_requests']:,} / "
        f"{changes['regressed_requests']:,}"
    )
    if apart["served_by_base_only"] or apart["served_by_other_only"]:
        text += (
            f"; served by {base} only: {apart['served_by_base_only']:,}, by {other} only: "
            f"{apart['served_by_other_only']:,} (latencies are each run's over its own served requests: "
            "their change is left out)"
        )
    return text


def _run(trace: Trace, config: SimConfig, setup: RunSetup) -> SimResult:
    from sim.progress import progress

    with progress(len(trace), f"simulating {config.policy}", "requests") as update:
        done = [0]

        def on_step(num_done: int) -> None:
            done[0] = num_done
            update(num_done)

        result = simulate(
            trace, config, on_step=on_step, on_phase=lambda what: update(done[0], what), setup=setup
        )
        update(done[0], "")  # the closing line says the run finished, not what it last did
        return result
