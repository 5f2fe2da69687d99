"""What ``cli.py simulate`` prints and writes: summary tables, the compare view, JSON, CSV files."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from reports.tables import compare_table, summary_table
from sim.atomic import atomic_write_many
from sim.metrics import compare
from sim.simulate import SimConfig, SimResult, simulate
from sim.trace import Trace


def run_simulate(trace: Trace, config: SimConfig, compare_policy: str | None, out_dir: str | None,
                 as_json: bool, trace_name: str = "trace") -> str:
    result = _run(trace, config)
    other = _run(trace, dataclasses.replace(config, policy=compare_policy)) if compare_policy else None
    if out_dir:
        write_tables(result, out_dir, other)
    if as_json:
        payload = dict(result.summary, policy=config.policy)
        if other is not None:
            payload["compare"] = dict(other.summary, policy=compare_policy, **compare(result.requests, other.requests))
        return json.dumps(payload)
    timed = config.mode == "timed"
    text = summary_table(result.summary, f"{config.policy} on {trace_name} ({config.model}, {config.gpu})", timed)
    text += rejection_note(result)
    if other is None:
        return text
    changes = compare(result.requests, other.requests)
    return "\n\n".join([text, summary_table(other.summary, compare_policy, timed),
                        compare_table(result.summary, other.summary, config.policy, compare_policy, changes)])


def rejection_note(result: SimResult) -> str:
    """Name the requests the pools could never hold (the first few, with why)."""
    rejected = result.requests[result.requests["rejected"] != ""]
    if rejected.empty:
        return ""
    shown = "; ".join(f"{row.id}: {row.rejected}" for row in rejected.head(3).itertuples())
    return f"\n  NOTE: {len(rejected)} request(s) never ran, e.g. {shown}"


def _run(trace: Trace, config: SimConfig) -> SimResult:
    from sim.progress import step_progress

    with step_progress(len(trace), f"simulating {config.policy}") as on_step:
        return simulate(trace, config, on_step=on_step)


def write_tables(result: SimResult, out_dir: str, other: SimResult | None = None) -> None:
    """requests.csv, steps.csv and summary.json (and *.<policy>.csv for the compared run), atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = [("", result)] + ([(f".{other.config.policy}", other)] if other is not None else [])
    files = {}
    for suffix, run in runs:
        files[out / f"requests{suffix}.csv"] = run.requests.to_csv(index=False)
        files[out / f"steps{suffix}.csv"] = run.steps.to_csv(index=False)
        files[out / f"summary{suffix}.json"] = json.dumps(run.summary, indent=1, sort_keys=True) + "\n"
    atomic_write_many(files)
