"""What a capacity planner reads off a timed grid: latency CDFs of the compared points, and, over
``--request-rate-scale``, goodput and SLO attainment against the arrival rate with, for each series (a policy
and its settings), the highest rate that meets the SLO (``sim/run/slo.py`` defines the figures)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reports.axes import Baseline, others, rest_of, shown, value_of
from reports.figures import RenderedFigure, new_figure, policy_color, render
from reports.formatting import percent, seconds
from reports.grid_data import GridData
from reports.report_formats import Section
from sim.run.slo import DEFAULT_ATTAINMENT, parse_slo
from sim.sched.request import served

RATE = "request_rate_scale"
LATENCIES = (("ttft_s", "TTFT (s)"), ("tpot_s", "TPOT (s)"), ("e2e_s", "E2E (s)"))
MAX_CURVES = 6  # lines a CDF panel can tell apart


def capacity_sections(data: GridData, baseline: Baseline | None) -> list[Section]:
    timed = data.points[data.points["mode"] == "timed"]
    if timed.empty:
        return []
    sections = [_cdf_section(data, baseline)]
    if RATE in data.settings and "request_rate_per_s" in data.points:
        sections.append(_rate_section(data))
    return sections


def series_of(data: GridData) -> dict[str, pd.DataFrame]:
    """The points by everything but the rate: one curve each, in grid order, its rows by rising rate."""
    labels = [
        ", ".join(f"{a}={shown(value_of(data, row, a))}" for a in others(data, RATE)) or "all"
        for _, row in data.points.iterrows()
    ]
    frame = data.points.assign(series=labels)
    return {
        label: frame[frame["series"] == label].sort_values("request_rate_per_s")
        for label in dict.fromkeys(labels)
    }


def target_of(data: GridData, key: str) -> float | None:
    config = data.configs.get(key)
    return parse_slo(config.slo).attainment if config is not None and config.slo else None


def highest_rate_table(data: GridData) -> pd.DataFrame:
    """Per series, the highest arrival rate below which every rate swept meets the SLO's attainment target:
    a rate that passes above a failing one is noise past the knee, not capacity. When even the fastest rate
    swept meets it the answer is a lower bound ("at least"), and "none" when the slowest already fails."""
    rows = []
    for label, points in series_of(data).items():
        target = target_of(data, points["key"].iloc[0])
        best, answer = _capacity(points, target)
        rows.append(
            {
                "series": label,
                "highest rate meeting the SLO (requests/s)": answer,
                "at scale": shown(value_of(data, best, RATE)) if best is not None else "-",
                "goodput there (requests/s)": f"{best['goodput_requests_per_s']:.3g}"
                if best is not None
                else "-",
                "attainment there": percent(best["slo_attainment"]) if best is not None else "-",
            }
        )
    return pd.DataFrame(rows)


def _capacity(points: pd.DataFrame, target: float | None) -> tuple[pd.Series | None, str]:
    """(the point at capacity, its rate as the table writes it) over points sorted by arrival rate."""
    if target is None:
        return None, "none (no SLO)"
    meets = list(points["slo_attainment"] >= target)
    num_meeting = meets.index(False) if False in meets else len(meets)
    if num_meeting == 0:
        return None, f"none (below {points['request_rate_per_s'].iloc[0]:.3g}, the slowest swept)"
    best = points.iloc[num_meeting - 1]
    rate = f"{best['request_rate_per_s']:.3g}"
    return best, (f"at least {rate} (the fastest swept)" if num_meeting == len(meets) else rate)


def rate_table(data: GridData) -> pd.DataFrame:
    rows = []
    has_slo = "slo_attainment" in data.points and data.points["slo_attainment"].notna().any()
    for label, points in series_of(data).items():
        for _, point in points.iterrows():
            row = {"series": label, "scale": shown(value_of(data, point, RATE))}
            row["arrivals (requests/s)"] = f"{point['request_rate_per_s']:.3g}"
            if has_slo:
                row["goodput (requests/s)"] = f"{point['goodput_requests_per_s']:.3g}"
                row["SLO attainment"] = percent(point["slo_attainment"])
            for name in ("ttft_p50_s", "ttft_p99_s", "tpot_p99_s", "itl_p99_s", "e2e_p99_s"):
                row[name.replace("_s", "").replace("_", " ").upper().replace(" P", " p") + " (s)"] = seconds(
                    point[name]
                )
            rows.append(row)
    return pd.DataFrame(rows)


def _rate_section(data: GridData) -> Section:
    has_slo = "slo_attainment" in data.points and data.points["slo_attainment"].notna().any()
    text = (
        "Each series is one policy and setting swept over `--request-rate-scale` (open-loop arrivals that many "
        "times as fast). *arrivals* is the rate requests arrived at in the run; *goodput* the requests served within the "
        "SLO per second of makespan; *SLO attainment* their share of all requests."
    )
    if not has_slo:
        text += (
            " The grid was run without `--slo`: give `grid --slo ttft=S,tpot=S` for goodput and attainment."
        )
    tables = [("", rate_table(data))]
    if has_slo:
        tables.insert(0, ("Highest rate that meets the SLO, per series", highest_rate_table(data)))
    return Section(
        "Capacity: goodput and latency against the arrival rate", text, tables, [goodput_figure(data)]
    )


def goodput_figure(data: GridData) -> RenderedFigure:
    has_slo = "slo_attainment" in data.points and data.points["slo_attainment"].notna().any()
    panels = (
        (("goodput_requests_per_s", "goodput (requests/s)"), ("slo_attainment", "SLO attainment"))
        if has_slo
        else (("ttft_p99_s", "TTFT p99 (s)"), ("e2e_p99_s", "E2E p99 (s)"))
    )
    figure, axes = new_figure(3.4, 1, 2, constrained_layout=True)
    labels = list(series_of(data))
    for ax, (column, label) in zip(axes.ravel(), panels, strict=True):
        for name, points in series_of(data).items():
            color = policy_color(labels, name)
            ax.plot(points["request_rate_per_s"], points[column], marker="o", color=color, label=name)
        if column == "slo_attainment":
            target = target_of(data, data.points["key"].iloc[0]) or DEFAULT_ATTAINMENT
            ax.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target {target:.0%}")
        ax.set_xlabel("arrival rate (requests/s)", fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    handles, names = axes[0][-1].get_legend_handles_labels()
    figure.legend(handles, names, loc="outside lower center", ncols=min(3, len(names)), fontsize=7)
    title = (
        "Goodput and SLO attainment against the arrival rate"
        if has_slo
        else "Latency against the arrival rate"
    )
    figure.suptitle(title, fontsize=10)
    return render(figure, "goodput-vs-rate", title)


def cdf_points(data: GridData, baseline: Baseline | None) -> list[str]:
    """The first setting's comparison: its baseline point and every other value's, at most MAX_CURVES."""
    first = data.points.iloc[0]
    axis = baseline.axis if baseline else None
    same = [
        row for _, row in data.points.iterrows() if rest_of(data, row, axis) == rest_of(data, first, axis)
    ]
    return [row["key"] for row in same][:MAX_CURVES]


def _cdf_section(data: GridData, baseline: Baseline | None) -> Section:
    keys = cdf_points(data, baseline)
    text = (
        "The share of served requests at or below each latency, for the points of the grid's first setting."
    )
    return Section("Latency distributions", text, figures=[latency_cdf_figure(data, keys, baseline)])


def latency_cdf_figure(data: GridData, keys: list[str], baseline: Baseline | None) -> RenderedFigure:
    figure, axes = new_figure(3.2, 1, len(LATENCIES), constrained_layout=True)
    names = [_curve_name(data, key, baseline) for key in keys]
    for ax, (column, label) in zip(axes.ravel(), LATENCIES, strict=True):
        for key, name in zip(keys, names, strict=True):
            values = np.sort(served(data.requests(key))[column].dropna().astype(float).to_numpy())
            if len(values):
                ax.step(
                    values,
                    np.arange(1, len(values) + 1) / len(values),
                    where="post",
                    color=policy_color(names, name),
                    label=name,
                )
        ax.set_xlabel(label, fontsize=8)
        ax.set_ylabel("share of requests", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(3, max(len(labels), 1)), fontsize=7)
    title = "Latency CDFs: TTFT, TPOT and end-to-end"
    figure.suptitle(title, fontsize=10)
    return render(figure, "latency-cdf", title)


def _curve_name(data: GridData, key: str, baseline: Baseline | None) -> str:
    point = data.row(key)
    if baseline is None:
        return str(point["policy"])
    return f"{baseline.axis}={shown(value_of(data, point, baseline.axis))} [{key[:6]}]"
