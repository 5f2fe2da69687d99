"""Reports of a grid: numbers equal the per-point results and the S1 experiment, every format, bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import cli
from reports.axes import Baseline
from reports.cost import cost_table, pareto_mask
from reports.grid_data import ALL, FOLLOWUP, load_grid
from reports.grid_tables import comparison_table, points_table
from reports.heatmap_metrics import metrics
from reports.heatmap_panel import Ticks
from reports.heatmaps import Layout, _grid
from reports.occupancy import choose_points
from reports.report import build_sections, write_report
from reports.report_formats import to_html, to_markdown
from sim.experiments import seeds as experiments
from sim.grid.axes import expand, parse_axes
from sim.grid.store import PointStore
from sim.grid.sweep import run_grid
from sim.trace import write_trace
from sim.trace.generate import s1

PAGES, INTERVALS = (64, 128), (128, 256)
SGLANG = Baseline("policy", "sglang")


@pytest.fixture(scope="module")
def grid_dir(tmp_path_factory):
    """The S1 grid of the seed (4 prompts instead of 32), two policies, page x interval."""
    root = tmp_path_factory.mktemp("grid")
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


@pytest.fixture(scope="module")
def sections(grid_dir):
    return build_sections(load_grid(grid_dir), SGLANG)


def test_reuse_columns_equal_each_points_summary_and_requests(grid_dir):
    data = load_grid(grid_dir)
    store = PointStore(grid_dir)
    assert data.scope == FOLLOWUP and len(data.points) == 8
    for _, point in data.points.iterrows():
        summary = store.read_point(point["key"])["summary"]
        followups = store.read_requests(point["key"]).query("followup")
        assert point["scoped_hits"] == summary["decode_region_hits"]
        assert point["scoped_requests"] == summary["followup_requests"] == 4
        assert point["scoped_cached_tokens"] == followups["cached_tokens"].sum()
        assert point["scoped_recomputed_tokens"] == followups["recomputed_tokens"].sum()
        assert (
            point["recomputed_tokens"] == summary["recomputed_tokens"]
        )  # one name, one figure: the summary's
        assert point["scoped_mean_reuse_fraction"] == pytest.approx(followups["reuse_fraction"].mean())
        assert point["peak_swa_slots"] == summary["peak_swa_slots"]
        assert points_table(data).set_index("point").loc[point["key"], "of bound"] == (
            f"{100 * summary['cached_tokens'] / summary['bound_tokens']:.1f}%"
        )


def test_comparison_table_equals_the_s1_experiment(grid_dir):
    """One figure per cell: each setting's baseline row, then the other policy's, as the seed's table has them."""
    table = comparison_table(load_grid(grid_dir), SGLANG)
    expected = experiments.s1(pages=PAGES, intervals=INTERVALS, num_prompts=4)
    assert list(zip(table["page"], table["interval"], strict=True)) == [
        (p, i) for p in PAGES for i in INTERVALS for _ in range(2)
    ]
    assert list(table["policy"]) == ["sglang (baseline)", "sglang-retain"] * 4
    for (_, seed), index in zip(expected.iterrows(), range(0, 8, 2), strict=True):
        base, other = table.iloc[index], table.iloc[index + 1]
        assert (
            base["decode-region hits"] == seed["sglang:hits"]
            and other["decode-region hits"] == seed["sglang-retain:hits"]
        )
        assert (base["reused"], other["reused"]) == (seed["sglang:reused"], seed["sglang-retain:reused"])
        assert (base["recomputed"], other["recomputed"]) == (
            seed["sglang:recomputed"],
            seed["sglang-retain:recomputed"],
        )
        assert other["mean reuse"] == f"{seed['sglang-retain:mean_reuse']:.3f}"
        assert (other["improved"], other["regressed"]) == (
            seed["improved_requests"],
            seed["regressed_requests"],
        )
        assert base["Δ reused"] == "" and other["served"] == "8/8"
    assert "4/4" in set(table["decode-region hits"]) and "0/4" in set(table["decode-region hits"])
    assert all("\n" not in str(cell) and " -> " not in str(cell) for cell in table.to_numpy().ravel())


def test_heatmap_cells_are_the_points_values(grid_dir):
    data = load_grid(grid_dir)
    hits, reused, _ = metrics(data.scope)
    layout, ticks = (
        Layout("policy", "page_size", "track_interval"),
        Ticks(list(PAGES), list(INTERVALS), "page_size", "track_interval"),
    )
    rows = [row for _, row in data.points.iterrows()]
    values, (texts, _), counts = _grid(data, rows, layout, "sglang", ticks, hits)
    for _, point in data.points[data.points["policy"] == "sglang"].iterrows():
        i, j = PAGES.index(point["page_size"]), INTERVALS.index(point["track_interval"])
        assert texts[i, j] == f"{point['scoped_hits']}/4" and counts[i, j] == point["scoped_hits"]
        assert values[i, j] == point["scoped_hits"] / 4
    values, _, _ = _grid(data, rows, layout, "sglang-retain", ticks, reused)
    assert values.tolist() == [
        [
            float(v)
            for v in data.points.query(f"policy == 'sglang-retain' and page_size == {p}")[
                "scoped_cached_tokens"
            ]
        ]
        for p in PAGES
    ]


def test_pareto_mask_keeps_points_nothing_beats():
    costs, gains = [10, 20, 20, 30, 5], [100, 150, 120, 150, 50]
    assert pareto_mask(costs, gains) == [True, True, False, False, True]
    assert pareto_mask([1, 1], [5, 5]) == [True, True]  # equal points do not dominate each other


def test_cost_table_marks_the_frontier(grid_dir):
    table = cost_table(load_grid(grid_dir))
    best = table["reused tokens"].max()
    peaks = table["peak SWA held (tokens)"].str.replace(",", "").astype(int)
    cheapest_best = peaks[table["reused tokens"] == best].min()
    marked = table[table["on the frontier of"].str.contains("peak SWA")]
    assert (marked["reused tokens"] == best).any()
    assert peaks[marked[marked["reused tokens"] == best].index[0]] == cheapest_best


def test_occupancy_points_default_to_baseline_and_other_at_the_first_setting(grid_dir):
    data = load_grid(grid_dir)
    first, second = choose_points(data, SGLANG)
    assert data.row(first)["policy"] == "sglang" and data.row(second)["policy"] == "sglang-retain"
    assert data.row(first)["setting"] == data.row(second)["setting"] == data.points.iloc[0]["setting"]
    key = data.points.iloc[5]["key"]
    assert choose_points(data, SGLANG, [key[:6]]) == [key]
    with pytest.raises(ValueError, match="matches no finished point"):
        choose_points(data, SGLANG, ["zzzz"])


def test_markdown_and_html_hold_every_table_and_figure(sections):
    text = to_markdown("S1", [("trace", "`s1.jsonl`")], sections)
    assert "| page | interval | policy | decode-region hits |" in text and "| sglang (baseline) |" in text
    figures = [f for s in sections for f in s.figures]
    assert {f.name for f in figures} == {
        "heatmap-hits",
        "heatmap-reused_tokens",
        "heatmap-mean_reuse",
        "cost",
        "occupancy",
        "latency-cdf",
    }
    assert "drag each file into the comment box" in text and "*figures/cost.png*" in text
    assert all(f.png.startswith(b"\x89PNG") for f in figures)
    page = to_html("S1", [("trace", "`s1.jsonl`")], sections)
    assert page.count("data:image/png;base64,") == len(figures)
    assert 'src="http' not in page and "<table" in page and "sglang (baseline)" in page


def test_cli_report_md_writes_the_markdown_and_its_pngs(grid_dir):
    result = CliRunner().invoke(cli, ["report", str(grid_dir), "--baseline", "sglang", "--format", "md"])
    assert result.exit_code == 0, result.output
    text = (grid_dir / "report.md").read_text()
    for name in ("heatmap-hits", "cost", "occupancy"):
        assert f"(figures/{name}.png)" in text and (grid_dir / "figures" / f"{name}.png").is_file()
    assert "## Reuse: policy=sglang -> each other policy" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", "{missing}"], "does not exist"),
        (["report", "{grid}", "--baseline", "radix"], "'radix' is not a policy of this grid"),
        (["report", "{grid}", "--points", "nope"], "'nope' matches no finished point"),
        (["report", "{grid}", "--format", "pdf"], "'pdf' is not one of"),
        (["report", "{plain}"], "no grid.json"),
    ],
)
def test_cli_report_rejects_bad_input_with_exit_2(grid_dir, tmp_path, args, message):
    paths = {"missing": tmp_path / "missing", "grid": grid_dir, "plain": tmp_path}
    result = CliRunner().invoke(cli, [a.format(**paths) for a in args])
    assert result.exit_code == 2
    assert message in result.output


def test_a_trace_without_follow_ups_is_measured_over_all_requests(tmp_path):
    write_trace(s1(num_prompts=3), tmp_path / "s1.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "s1.jsonl").read_text().splitlines()]
    first_turns = tmp_path / "first.jsonl"
    first_turns.write_text("".join(json.dumps(r) + "\n" for r in lines if "after" not in r))
    configs = expand(
        parse_axes(
            {
                "policy": "sglang",
                "chunked_prefill_size": "16384",
                "pool_tokens": "400000",
                "mamba_states": "64",
            }
        )
    )
    run_grid(first_turns, configs, tmp_path / "out", jobs=1, progress=False)
    data = load_grid(tmp_path / "out")
    assert data.scope == ALL and data.points.iloc[0]["scoped_requests"] == 3
    assert write_report(tmp_path / "out", fmt="png").paths == [
        tmp_path / "out" / "figures" / f"{name}.png" for name in ("latency-cdf", "cost", "occupancy")
    ]  # one point
    assert not (tmp_path / "out" / "report.md").exists()


def test_figures_are_byte_identical_from_the_same_results(grid_dir):
    from reports.cost import cost_figure

    data = load_grid(grid_dir)
    assert cost_figure(data).png == cost_figure(data).png
