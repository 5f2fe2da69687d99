"""A grid's size is announced before any work and refused past --max-points (default sim/grid/axes.MAX_POINTS)
unless raised, on the command line or in a grid file; counted, never built (10^12 points answer at once)."""
from __future__ import annotations

import pytest

from sim.grid.axes import MAX_POINTS, check_grid_size, expand, grid_size, parse_axes
from tests.bad_input_helpers import GOOD_LINES, assert_rejected, invoke, lines_text

PAGES = ",".join(str(16 * i) for i in range(1, 41))  # 40 values
INTERVALS = ",".join(str(64 * i) for i in range(1, 31))  # 30 values: 1,200 points with the pages


def test_the_size_is_counted_with_its_factors():
    axes = parse_axes({"policy": "radix,sglang", "page_size": "64", "track_interval": "128,256,512"})
    assert grid_size(axes) == (6, "track_interval 3 x policy 2 = 6 points")
    assert grid_size(parse_axes({"policy": "radix"})) == (1, "1 point")


def test_a_grid_past_the_limit_is_refused_before_a_point_is_built():
    axes = {name: list(range(100)) for name in ("page_size", "track_interval", "window", "chunked_prefill_size",
                                                 "swa_eviction_interval", "max_running_requests")}
    with pytest.raises(ValueError, match=r"--max-points: the grid has .* = 1,000,000,000,000 points, over the "
                                         r"limit of 1,000; .* raise --max-points to 1000000000000"):
        expand(axes)
    assert check_grid_size(axes, 10**12) == 10**12


def test_the_command_announces_the_size_and_refuses_past_the_limit(tmp_path):
    (tmp_path / "t.jsonl").write_text(lines_text(*GOOD_LINES))
    base = ["grid", "--trace", tmp_path / "t.jsonl", "--out", tmp_path / "g", "--page-size", PAGES,
            "--track-interval", INTERVALS]
    refused = invoke(base)
    assert_rejected(refused, "--max-points", "page_size 40 x track_interval 30 = 1,200 points", f"{MAX_POINTS:,}")
    assert "grid: page_size 40 x track_interval 30 = 1,200 points (at most 1,000: --max-points)" in refused.output
    assert not (tmp_path / "g").exists()
    (tmp_path / "t.jsonl").write_text("not json\n")  # raised: past the size check, stopped by the trace
    assert_rejected(invoke([*base, "--max-points", "1200"]), f"{tmp_path / 't.jsonl'}:1: json")


def test_a_grid_file_raises_the_limit_too(tmp_path):
    (tmp_path / "t.jsonl").write_text("not json\n")
    (tmp_path / "g.toml").write_text(f'trace = "t.jsonl"\nout = "g"\nmax_points = 1200\n[axes]\n'
                                     f"page_size = [{PAGES}]\ntrack_interval = [{INTERVALS}]\n")
    assert_rejected(invoke(["grid", "--config", tmp_path / "g.toml"]), f"{tmp_path / 't.jsonl'}:1: json")
    assert_rejected(invoke(["grid", "--config", tmp_path / "g.toml", "--max-points", "10"]), "--max-points")
    (tmp_path / "g.toml").write_text('trace = "t.jsonl"\nout = "g"\nmax_points = 0\n')
    assert_rejected(invoke(["grid", "--config", tmp_path / "g.toml"]), f"{tmp_path / 'g.toml'}:3: max_points")
