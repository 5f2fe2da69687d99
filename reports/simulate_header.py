"""The header of what ``cli.py simulate`` prints: each run's rules and knobs as they resolved, and the pools."""

from __future__ import annotations

from dataclasses import dataclass

from reports.formatting import count
from sim.engines.pool_views import PoolLayout
from sim.engines.registry import KNOBS
from sim.run.summary import Summary


@dataclass(frozen=True)
class Run:
    """One run as the view needs it: its policy, summary, and resolved configuration (``sim/run/resolved.py``)."""

    policy: str
    summary: Summary
    resolved: dict
    layout: PoolLayout | None = None  # the engine's pools (None: counted as a radix cache counts them)


def header_lines(runs: list[Run], title: str) -> list[str]:
    lines = [title]
    for run in runs:
        lines.append(f"{run.policy}: {describe_knobs(run.resolved)}")
    lines.append("pools: " + describe_pools(runs[0].resolved))
    return lines


def describe_knobs(resolved: dict) -> str:
    """Every knob the rules read, as run (a deliberately wrong one only where it is set)."""
    knobs = resolved["knobs"]
    shown = ", ".join(
        f"{name} {_value(value)}" for name, value in knobs.items() if _applies(name, value, resolved)
    )
    settled = "".join(f", {name.replace('_', ' ')} {value}" for name, value in resolved["grids"].items())
    return f"rules {resolved['rules']}, cache {resolved['cache']}; {shown}" + (
        f"; {settled[2:]}" if settled else ""
    )


def describe_pools(resolved: dict) -> str:
    pools = resolved["pools"]
    if pools.get("blocks"):
        return (
            f"one shared block pool of {count(pools['blocks'])} blocks of {pools['block_size']} tokens "
            f"({count(pools['block_slots'])} token slots) for groups {pools['groups']}"
        )
    return (
        f"FULL {count(pools['full_slots'])} tokens, SWA {count(pools['swa_slots'])} tokens, MAMBA "
        f"{count(pools['mamba_states'])} states"
    )


def _applies(name: str, value, resolved: dict) -> bool:
    spec = KNOBS.get(name)
    if spec is None:
        return True
    if spec.hidden:
        return bool(value)
    return spec.engines is None or resolved["rules"] in spec.engines


def _value(value) -> str:
    return "none" if value is None else str(value)
