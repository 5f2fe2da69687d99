"""The cost side of reuse: reused tokens against peak and mean SWA and MAMBA pool occupancy, per point,
with the Pareto frontier (no other point reuses as much for less) marked."""

from __future__ import annotations

import pandas as pd
from matplotlib.transforms import Bbox

from reports.figures import RenderedFigure, new_figure, policy_color, policy_marker, render, thousands
from reports.formatting import count
from reports.grid_data import GridData
from reports.grid_tables import components, setting_columns

COSTS = (
    ("peak_swa_slots", "peak SWA held (tokens)"),
    ("mean_swa_slots", "mean SWA held (tokens)"),
    ("peak_mamba_states", "peak MAMBA held (states)"),
    ("mean_mamba_states", "mean MAMBA held (states)"),
)
GAIN = "scoped_cached_tokens"


def costs(data: GridData) -> list[tuple[str, str]]:
    """The costs of the retained components some point's model has (a model without SWA layers draws no
    SWA panel); none for a FULL-only grid, which has nothing to retain."""
    held = {c.pool_name for c in components(data)}
    return [(column, label) for column, label in COSTS if label.split()[1] in held]


def pareto_mask(costs: list[float], gains: list[float]) -> list[bool]:
    """True where no other point costs no more and reuses no less, and is strictly better in one."""
    points = list(zip(costs, gains, strict=True))

    def dominated(c: float, g: float) -> bool:
        return any(oc <= c and og >= g and (oc < c or og > g) for oc, og in points)

    return [not dominated(c, g) for c, g in points]


def cost_table(data: GridData) -> pd.DataFrame:
    points = data.points
    table = pd.DataFrame({"point": points["key"]})
    if len(data.policies()) > 1 or not data.settings:  # one policy: the header names it
        table["policy"] = points["policy"].values
    for name, values in setting_columns(data).items():
        table[name] = values
    table["reused tokens"] = points[GAIN].values
    frontier = {label: pareto_mask(list(points[cost]), list(points[GAIN])) for cost, label in costs(data)}
    for cost, label in costs(data):
        table[label] = [_count(value) for value in points[cost]]
    table["on the frontier of"] = [
        ", ".join(label.split(" held")[0] for label in frontier if frontier[label][i]) or "-"
        for i in range(len(points))
    ]
    return table


def _count(value: float) -> str:
    """Peaks are whole slots; means keep one decimal (a tenth of a slot is plenty)."""
    return count(value)


def cost_figure(data: GridData) -> RenderedFigure:
    pools = " and ".join(dict.fromkeys(label.split()[1] for _, label in costs(data)))
    title = f"What retention costs: reuse against {pools} pool occupancy (each point one grid point)"
    return render(cost_plot(data, title), "cost", title)


def cost_plot(data: GridData, title: str):
    shown_costs = costs(data)
    nrows = len(shown_costs) // 2
    figure, axes = new_figure(0.8 + 3.0 * nrows, nrows, 2, constrained_layout=True)
    for ax, (cost, label) in zip(axes.ravel(), shown_costs, strict=True):
        _draw_cost(ax, data, cost, label)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=len(labels),
        fontsize=8,
        title=f"labels: {point_label_legend(data)}",
        title_fontsize=8,
    )
    figure.suptitle(title, fontsize=10)
    figure.canvas.draw()  # lays the panels out: labels are placed in the pixels they will be drawn at
    for ax, (cost, _) in zip(axes.ravel(), shown_costs, strict=True):
        _annotate(ax, data.points[cost], data.points[GAIN], point_labels(data))
    return figure


def point_labels(data: GridData) -> list[str]:
    """Each point's setting, short: ``64/256`` for page/interval (the legend's title says so)."""
    columns = list(setting_columns(data).values())
    if not columns:
        return ["" for _ in range(len(data.points))]
    return ["/".join(str(column[i]) for column in columns) for i in range(len(data.points))]


def point_label_legend(data: GridData) -> str:
    return "/".join(setting_columns(data)) or "one setting"


def _draw_cost(ax, data: GridData, cost: str, label: str) -> None:
    points, policies = data.points, data.policies()
    for policy in policies:
        mine = points[points["policy"] == policy]
        marker, size = policy_marker(policies, policy)
        ax.scatter(
            mine[cost],
            mine[GAIN],
            marker=marker,
            s=size,
            facecolors="none",
            linewidths=1.5,
            edgecolors=policy_color(policies, policy),
            label=policy,
            zorder=3,
        )
    on_front = points[pareto_mask(list(points[cost]), list(points[GAIN]))].sort_values(cost)
    ax.step(
        on_front[cost],
        on_front[GAIN],
        where="post",
        color="black",
        linestyle="--",
        linewidth=1,
        zorder=1,
        label="Pareto frontier",
    )
    ax.set_xlabel(label, fontsize=8)
    ax.set_ylabel(f"reused tokens ({data.scope} requests)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.xaxis.set_major_formatter(lambda value, _: thousands(value))
    ax.yaxis.set_major_formatter(lambda value, _: thousands(value))
    ax.margins(0.15)
    ax.grid(alpha=0.3)


MERGE_PX = 12  # points closer than this on the canvas share one label
MARKER_PX = 8  # a marker's half width: labels keep off other points' markers
GAP_PT = 5  # a label's distance from its point
# where a label may go, tried in order: (points right, points up) of its point; ha follows the side
PLACES = [(side * GAP_PT, rise) for rise in (2, -9, 11, -18, 20, -27) for side in (1, -1)]


def _annotate(ax, xs, ys, labels: list[str]) -> None:
    """One label per place (points that coincide or nearly share it), each put where it overlaps no other
    label and no other marker and stays inside the panel: right of its point, else left, else moved up or
    down. Called after the layout is fixed, so the pixel positions are the ones drawn."""
    renderer = ax.figure.canvas.get_renderer()
    pixels = ax.transData.transform(list(zip(xs, ys, strict=True)))
    groups = _label_groups(pixels, labels)
    panel, placed = ax.get_window_extent(renderer), list[Bbox]()
    for (px, py), names, spread in sorted(groups, key=lambda g: (-g[0][1], g[0][0])):
        others = [
            _box(qx - MARKER_PX, qy - MARKER_PX, qx + MARKER_PX, qy + MARKER_PX)
            for qx, qy in pixels
            if abs(qx - px) >= MERGE_PX or abs(qy - py) >= MERGE_PX
        ]
        x, y = ax.transData.inverted().transform((px, py))
        for dx, dy in PLACES:
            dx += (1 if dx > 0 else -1) * spread * 72 / ax.figure.dpi  # clear the group's farthest marker
            text = ax.annotate(
                ", ".join(names),
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx > 0 else "right",
                va="center",
                fontsize=6,
                color="#333333",
                gid="point-label",
                annotation_clip=False,
            )
            text.set_in_layout(False)
            box = text.get_window_extent(renderer)
            fits = panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y0 <= box.y0 and box.y1 <= panel.y1
            if fits and not any(box.overlaps(b) for b in placed + others) or dy == PLACES[-1][1] and dx < 0:
                placed.append(box)
                break
            text.remove()


def _label_groups(pixels, labels: list[str]) -> list[tuple[list[float], list[str], float]]:
    """(pixel position of the first point, its labels, how far right or left its other points lie)."""
    groups: list[tuple[list[float], list[str], list[float]]] = []
    for (px, py), label in zip(pixels, labels, strict=True):
        group = next(
            (g for g in groups if abs(g[0][0] - px) < MERGE_PX and abs(g[0][1] - py) < MERGE_PX), None
        )
        if group is None:
            groups.append(([px, py], [label], [0.0]))
            continue
        group[2].append(abs(px - group[0][0]))
        if label not in group[1]:
            group[1].append(label)
    return [(position, names, max(spreads)) for position, names, spreads in groups]


def _box(x0: float, y0: float, x1: float, y1: float) -> Bbox:
    return Bbox.from_extents(x0, y0, x1, y1)
