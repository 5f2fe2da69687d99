"""The figures' numbers as drawn: scales, labels that fit, every point labelled, peaks of the full series."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import reports.occupancy as occupancy
from reports.axes import Baseline
from reports.cell_fit import cell_texts, cell_width_px
from reports.cost import cost_plot, point_labels
from reports.grid_data import load_grid
from reports.heatmap_metrics import metrics
from reports.heatmaps import Layout, heatmap_figure
from sim.grid.axes import expand, parse_axes
from sim.grid.store import PointStore
from sim.grid.sweep import run_grid
from sim.trace import write_trace
from sim.trace.generate import s1


@pytest.fixture(scope="module")
def grid_dir(tmp_path_factory):
    """S1 (4 prompts): two policies over page 64, 128 x interval 128, 256; equal at interval 128."""
    root = tmp_path_factory.mktemp("figures")
    write_trace(s1(num_prompts=4), root / "s1.jsonl")
    configs = expand(
        parse_axes(
            {
                "policy": "sglang,sglang-retain",
                "page_size": "64,128",
                "track_interval": "128,256",
                "chunked_prefill_size": "16384",
                "pool_tokens": "4000000",
                "mamba_states": "4096",
            }
        )
    )
    run_grid(root / "s1.jsonl", configs, root / "out", jobs=1, progress=False)
    return root / "out"


SGLANG = Baseline("policy", "sglang")
PAGE_X_INTERVAL = Layout("policy", "page_size", "track_interval")


def draw(data, points, metric, title, baseline=SGLANG):
    return heatmap_figure(data, points, PAGE_X_INTERVAL, baseline, metric, title)


def panels(figure) -> dict[str, object]:
    """Heatmap panels by title (colour bars have none)."""
    return {ax.get_title(): ax for ax in figure.axes if ax.get_title()}


def colour_limits(ax) -> tuple[float, float]:
    return ax.images[0].get_clim()


def test_fractions_are_coloured_on_0_to_1_and_cells_are_the_points(grid_dir):
    data = load_grid(grid_dir)
    hits, reused, mean = metrics(data.scope)
    figure = draw(data, data.points, hits, "hits")
    drawn = panels(figure)
    for policy in ("sglang", "sglang-retain"):
        assert colour_limits(drawn[f"policy={policy}"]) == (0.0, 1.0)
        texts = sorted(t.get_text() for t in cell_texts(drawn[f"policy={policy}"]))
        points = data.points[data.points["policy"] == policy]
        assert texts == sorted(
            f"{h}/{n}" for h, n in zip(points["scoped_hits"], points["scoped_requests"], strict=True)
        )
    difference = drawn["policy=sglang-retain − sglang"]
    low, high = colour_limits(difference)
    assert low == -high and high == pytest.approx(1.0)  # centred at 0; 0/4 -> 4/4 is the largest change
    assert sorted(t.get_text() for t in cell_texts(difference)) == ["+4", "+4", "0", "0"]
    figure = draw(data, data.points, mean, "mean")
    assert colour_limits(panels(figure)["policy=sglang"]) == (0.0, 1.0)
    assert all(t.get_text().endswith("%") for t in cell_texts(panels(figure)["policy=sglang"]))


def test_a_panel_with_no_difference_says_so_and_has_no_scale(grid_dir):
    data = load_grid(grid_dir)
    equal = data.points[data.points["track_interval"] == 128]  # the floor changes nothing at interval 128
    figure = draw(data, equal, metrics(data.scope)[1], "reused")
    titles = list(panels(figure))
    assert "policy=sglang-retain − sglang: no difference" in titles
    flat = panels(figure)["policy=sglang-retain − sglang: no difference"]
    assert {t.get_text() for t in cell_texts(flat)} == {"0"}
    assert len(figure.axes) == 2 * 2 + 1  # two policy panels with a colour bar each; the flat one has none
    assert not any("e-" in t.get_text() for ax in figure.axes for t in ax.get_yticklabels())


def test_long_cell_labels_fit_their_cells():
    """1,489/1,500 in a grid of eight intervals: the labels shrink, then wrap, and never spill."""
    rows = [
        {
            "policy": policy,
            "page_size": page,
            "track_interval": interval,
            "scoped_hits": 1489,
            "scoped_requests": 1500,
            "scoped_cached_tokens": 12_345_678 + interval,
            "scoped_mean_reuse_fraction": 0.95,
        }
        for policy in ("a", "b")
        for page in (64, 128)
        for interval in (128, 256, 384, 512, 640, 768, 896, 1024)
    ]
    points = pd.DataFrame(rows).assign(
        setting=lambda f: list(zip(f["page_size"], f["track_interval"], strict=True))
    )
    data = SimpleNamespace(
        points=points, settings=["page_size", "track_interval"], policies=lambda: ["a", "b"]
    )
    for metric in metrics("follow-up"):
        figure = draw(data, points, metric, "long", Baseline("policy", "a"))
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        for ax in figure.axes:
            texts = cell_texts(ax)
            if not texts:
                continue
            width = cell_width_px(ax, renderer) / 0.92
            for text in texts:
                box = text.get_bbox_patch().get_window_extent(renderer)
                assert box.width <= width, (metric.name, text.get_text(), box.width, width)
                assert text.get_fontsize() >= 6.5


def test_every_cost_point_is_labelled_and_every_policy_in_the_legend(grid_dir):
    data = load_grid(grid_dir)
    figure = cost_plot(data, "cost")
    legend = figure.legends[0]
    assert {t.get_text() for t in legend.get_texts()} == {"sglang", "sglang-retain", "Pareto frontier"}
    assert legend.get_title().get_text() == "labels: page/interval"
    labels = set(point_labels(data))
    assert labels == {"64/128", "64/256", "128/128", "128/256"}
    for ax in figure.axes:
        drawn = [t.get_text() for t in ax.texts if t.get_gid() == "point-label"]
        assert {part for text in drawn for part in text.split(", ")} == labels  # each setting, once per place
        sizes = [
            c.get_sizes()[0]
            for c in ax.collections
            if len(c.get_offsets()) and c.get_label() in ("sglang", "sglang-retain")
        ]
        assert sizes[0] > sizes[1]  # the second policy's markers sit inside the first's where they coincide


@pytest.fixture(scope="module")
def wide_grid_dir(tmp_path_factory):
    """S1 (32 prompts) over page 64, 128 x interval 128, 256, 512: points close enough to crowd the labels."""
    root = tmp_path_factory.mktemp("wide")
    write_trace(s1(), root / "s1.jsonl")
    configs = expand(
        parse_axes(
            {
                "policy": "sglang,sglang-retain",
                "page_size": "64,128",
                "track_interval": "128,256,512",
                "chunked_prefill_size": "16384",
                "pool_tokens": "4000000",
                "mamba_states": "4096",
            }
        )
    )
    run_grid(root / "s1.jsonl", configs, root / "out", jobs=1, progress=False)
    return root / "out"


def test_cost_labels_overlap_nothing_and_stay_in_their_panels(wide_grid_dir):
    """As saved (the layout run again): no label over another, over another point's marker, or off its panel."""
    figure = cost_plot(load_grid(wide_grid_dir), "cost")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_gid() == "point-label"]
        panel = ax.get_window_extent(renderer)
        assert boxes and all(
            panel.x0 <= b.x0 and b.x1 <= panel.x1 and panel.y0 <= b.y0 and b.y1 <= panel.y1 for b in boxes
        )
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
        markers = [
            xy
            for c in ax.collections
            if c.get_label() in ("sglang", "sglang-retain")
            for xy in ax.transData.transform(c.get_offsets())
        ]
        for box in boxes:  # a marker's centre never lies under a label
            assert not any(box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1 for x, y in markers)


def test_envelope_keeps_the_peak_a_stride_would_miss():
    held = pd.Series(np.ones(10_000, dtype=int))
    held.iloc[4321] = 99  # one step's spike, off any stride
    steps = pd.DataFrame({"step": range(10_000), "held": held})
    drawn = occupancy.envelope(steps, held, limit=100)
    assert len(drawn) <= 100 and drawn["held"].max() == 99
    assert list(drawn["step"]) == sorted(drawn["step"])


def test_occupancy_titles_give_the_full_series_peak_even_when_thinned(grid_dir, monkeypatch):
    data = load_grid(grid_dir)
    key = data.points.iloc[0]["key"]
    summary = PointStore(grid_dir).read_point(key)["summary"]
    monkeypatch.setattr(occupancy, "MAX_STEPS_DRAWN", 40)  # the run has hundreds of steps: thinning is on
    assert len(data.steps(key)) > 4 * 40
    figure = occupancy.occupancy_plot(data, [key])
    titles = {ax.get_title().split(":")[0]: ax for ax in figure.axes if ax.get_title()}
    for name, peak, capacity in (
        ("SWA KV", "peak_swa_slots", "capacity_swa_slots"),  # the engine's names
        ("FULL KV", "peak_full_slots", "capacity_full_slots"),
        ("MAMBA", "peak_mamba_states", "capacity_mamba_states"),
    ):
        ax = titles[name]
        assert f"peak {summary[peak]:,} of\n{summary[capacity]:,}" in ax.get_title()
        held_top = max(path.vertices[:, 1].max() for path in ax.collections[1].get_paths())
        assert held_top == summary[peak]  # the drawn series reaches the peak the title names
