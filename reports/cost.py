"""The cost side of reuse: reused tokens against peak and mean SWA and MAMBA pool occupancy, per point,
with the Pareto frontier (no other point reuses as much for less) marked."""
from __future__ import annotations

import pandas as pd

from reports.figures import RenderedFigure, new_figure, policy_color, render, thousands
from reports.grid_data import GridData
from reports.grid_tables import setting_columns

COSTS = (("peak_swa_slots", "peak SWA held (tokens)"), ("mean_swa_slots", "mean SWA held (tokens)"),
         ("peak_mamba_states", "peak MAMBA held (states)"), ("mean_mamba_states", "mean MAMBA held (states)"))
GAIN = "reused_tokens"


def pareto_mask(costs: list[float], gains: list[float]) -> list[bool]:
    """True where no other point costs no more and reuses no less, and is strictly better in one."""
    points = list(zip(costs, gains, strict=True))

    def dominated(c: float, g: float) -> bool:
        return any(oc <= c and og >= g and (oc < c or og > g) for oc, og in points)

    return [not dominated(c, g) for c, g in points]


def cost_table(data: GridData) -> pd.DataFrame:
    points = data.points
    table = pd.DataFrame({"point": points["key"], "policy": points["policy"]})
    for name, values in setting_columns(data).items():
        table[name] = values
    table["reused tokens"] = points[GAIN].values
    frontier = {label: pareto_mask(list(points[cost]), list(points[GAIN])) for cost, label in COSTS}
    for cost, label in COSTS:
        table[label] = [_count(value) for value in points[cost]]
    table["on the frontier of"] = [", ".join(label.split(" held")[0] for label in frontier if frontier[label][i])
                                   or "-" for i in range(len(points))]
    return table


def _count(value: float) -> str:
    """Peaks are whole slots; means keep one decimal (a tenth of a slot is plenty)."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def cost_figure(data: GridData) -> RenderedFigure:
    figure, axes = new_figure(6.4, 2, 2, constrained_layout=True)
    for ax, (cost, label) in zip(axes.ravel(), COSTS, strict=True):
        _draw_cost(ax, data, cost, label)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8)
    title = "What retention costs: reuse against SWA and MAMBA pool occupancy (each point one grid point)"
    figure.suptitle(title, fontsize=11)
    return render(figure, "cost", title)


def _draw_cost(ax, data: GridData, cost: str, label: str) -> None:
    points, policies = data.points, data.policies()
    for policy in policies:
        mine = points[points["policy"] == policy]
        ax.scatter(mine[cost], mine[GAIN], color=policy_color(policies, policy), label=policy, s=28, zorder=2)
    on_front = points[pareto_mask(list(points[cost]), list(points[GAIN]))].sort_values(cost)
    ax.step(on_front[cost], on_front[GAIN], where="post", color="black", linestyle="--", linewidth=1, zorder=1)
    ax.scatter(on_front[cost], on_front[GAIN], facecolors="none", edgecolors="black", s=90, zorder=3,
               label="Pareto frontier")
    ax.set_xlabel(label)
    ax.set_ylabel(f"reused tokens ({data.scope} requests)")
    ax.xaxis.set_major_formatter(lambda value, _: thousands(value))
    ax.yaxis.set_major_formatter(lambda value, _: thousands(value))
    ax.grid(alpha=0.3)
