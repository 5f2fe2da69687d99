"""The reviewer flows of issue 25, end to end through the command line: a vLLM PR's retention intervals on
Qwen3.5-4B, an SGLang PR's track intervals, and a capacity sweep; each report right for its engine and axis,
paste-ready (markdown and HTML, the HTML in a real browser)."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from cli import cli
from reports.grid_data import load_grid
from reports.occupancy import occupancy_plot
from sim.grid.store import PointStore
from tests.test_report_html import browser, run_browser

VLLM_RETENTION = ["--policy", "vllm", "--model", "qwen3.5-4b", "--prefill-checkpoints", "off",
                  "--retention-interval", "none,0,2112"]


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def vllm_grid(tmp_path_factory):
    out = tmp_path_factory.mktemp("vllm") / "grid"
    invoke("grid", "--trace", "traces/mooncake_conversation_500.jsonl", *VLLM_RETENTION, "--jobs", "1", "--out", str(out))
    invoke("report", str(out))
    invoke("report", str(out), "--format", "html")
    return out


def test_the_vllm_header_names_its_block_pool_and_groups(vllm_grid):
    text = (vllm_grid / "report.md").read_text()
    summary = PointStore(vllm_grid).read_point(load_grid(vllm_grid).points["key"].iloc[0])["summary"]
    blocks = summary["capacity_blocks"]
    assert f"one block pool of {blocks:,} blocks of 528 tokens, groups mamba mamba mamba full" in text
    assert f"FULL group (1) {blocks * 528:,} tokens, MAMBA groups (3) {blocks:,} states" in text
    assert "no pool" not in text and "FULL 0 tokens" not in text and "SWA" not in text.split("## ")[0]
    assert re.search(r"\*\*evictions\*\*: FULL [\d,–]+, MAMBA [\d,–]+ blocks", text)


def test_a_grid_over_one_policys_knob_gets_its_comparison(vllm_grid):
    text = (vllm_grid / "report.md").read_text()
    assert "## Reuse: retention_interval=none -> each other retention_interval" in text
    table = text.split("## Reuse: retention_interval=none")[1].split("\n## ")[0]
    assert "| none (baseline) |" in table and "\n| 0 |" in table and "\n| 2,112 |" in table
    assert "Reuse over" not in text and "heatmap" not in text  # nothing else varies: no one-cell heatmaps
    assert "blocked, other" not in text  # every recomputed token has its vLLM reason
    for line in table.splitlines():
        assert not line.startswith("|") or " -> " not in line  # one figure per cell


def test_vllm_occupancy_counts_528_token_blocks_and_draws_no_swa(vllm_grid):
    data = load_grid(vllm_grid)
    key = data.points["key"].iloc[0]
    summary = PointStore(vllm_grid).read_point(key)["summary"]
    figure = occupancy_plot(data, [key])
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert len(titles) == 2 and not any("SWA" in t for t in titles)
    full = next(t for t in titles if t.startswith("FULL group (1)"))
    assert f"peak {summary['peak_full_slots']:,} of\n{summary['capacity_full_slots']:,} tokens" in full
    heading = " ".join(sub.get_suptitle() for sub in figure.subfigs)
    assert "retention_interval none" in heading and "page" not in heading and "interval 256" not in heading


def test_grid_csv_writes_none_and_leaves_out_what_vllm_does_not_read(vllm_grid):
    table = pd.read_csv(vllm_grid / "grid.csv", dtype=str, keep_default_na=False)
    assert list(table["retention_interval"]) == ["none", "0", "2112"]
    assert set(table["track_interval"]) == {""} and set(table["swa_free_trigger"]) == {""}


def test_the_markdown_names_every_figure_for_upload(vllm_grid):
    text = (vllm_grid / "report.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)\n\*(figures/[^*]+\.png)\*", text)
    assert images and all(link == named and (vllm_grid / link).is_file() for link, named in images)
    assert "drag each file into the comment box" in text and str(vllm_grid) not in text


OVERFLOW = """<script>
window.addEventListener("load", function () {
  const tables = Array.from(document.querySelectorAll("table"));
  document.body.dataset.overflow = JSON.stringify(tables.map(t => t.scrollWidth - t.clientWidth));
  document.body.dataset.images = JSON.stringify(Array.from(document.images).map(i => i.naturalWidth));
});
</script>"""


def with_measuring_script(html: str) -> str:
    """The page with OVERFLOW added, and its hash added to the page's own script-src, so the rest of the
    Content-Security-Policy stays in force while the browser measures."""
    import base64
    import hashlib

    body = OVERFLOW.removeprefix("<script>").removesuffix("</script>")
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    assert html.count("script-src ") == 1
    html = html.replace("script-src ", f"script-src 'sha256-{digest}' ")
    return html.replace("</body>", OVERFLOW + "</body>")


@pytest.mark.skipif(browser() is None, reason="no headless browser: install Debian's chromium")
def test_the_html_shows_every_table_whole_in_a_1000_px_window(vllm_grid, tmp_path):
    page = tmp_path / "measured.html"
    page.write_text(with_measuring_script((vllm_grid / "report.html").read_text()))
    dumped = run_browser("--window-size=1000,2000", "--dump-dom", page.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dumped.stdout).group(0)
    overflow = json.loads(re.search(r'data-overflow="([^"]*)"', body).group(1).replace("&quot;", '"'))
    assert len(overflow) >= 5 and max(overflow) <= 0  # no table hides its right part behind a scrollbar
    widths = json.loads(re.search(r'data-images="([^"]*)"', body).group(1).replace("&quot;", '"'))
    assert widths and all(w == 800 for w in widths)  # every embedded figure decoded, at PR width


def test_an_sglang_interval_grid_compares_along_any_axis(tmp_path):
    out = tmp_path / "grid"
    invoke("trace", "gen", "s1", "--num-prompts", "4", "-o", str(tmp_path / "s1.jsonl"))
    invoke("grid", "--trace", str(tmp_path / "s1.jsonl"), "--policy", "sglang,sglang-retain",
           "--track-interval", "128,256,512", "--chunked-prefill-size", "16384", "--mode", "replay", "--jobs", "1",
           "--out", str(out))
    text = (out / "report.md").read_text() if invoke("report", str(out)) else ""
    assert "## Reuse: policy=sglang -> each other policy" in text and "## Reuse over track interval, by policy" in text
    with Image.open(out / "figures" / "heatmap-hits.png") as image:
        assert image.width == 800
    invoke("report", str(out), "--baseline", "track_interval=128")
    text = (out / "report.md").read_text()
    assert "## Reuse: track_interval=128 -> each other track_interval" in text
    table = text.split("## Reuse: track_interval=128")[1].split("\n## ")[0]
    assert table.count("| 128 (baseline) |") == 2  # one baseline row per policy, its other intervals after it
    assert "## Reuse over policy, by track_interval" in text


@pytest.mark.parametrize(("baseline", "message"), [
    ("page_size=64", "'page_size' does not vary in this grid; it varies retention_interval"),
    ("retention_interval=7", "retention_interval takes none, 0, 2112 in this grid"),
    ("sglang", "'sglang' is not a policy of this grid; it has vllm"),
])
def test_a_baseline_the_grid_cannot_take_is_named(vllm_grid, baseline, message):
    result = CliRunner().invoke(cli, ["report", str(vllm_grid), "--baseline", baseline])
    assert result.exit_code == 2 and message in result.output


def test_a_capacity_sweep_names_the_highest_rate_that_meets_the_slo(tmp_path):
    out = tmp_path / "grid"
    invoke("grid", "--trace", "traces/fanout.jsonl", "--policy", "sglang,sglang-retain", "--request-rate-scale",
           "1,4,16", "--slo", "ttft=0.0022,tpot=0.0015,attainment=0.5", "--jobs", "1", "--out", str(out))
    invoke("report", str(out))
    text = (out / "report.md").read_text()
    assert "## Capacity: goodput and latency against the arrival rate" in text
    assert (out / "figures" / "goodput-vs-rate.png").is_file() and (out / "figures" / "latency-cdf.png").is_file()
    points = pd.read_csv(out / "grid.csv")
    assert "**SLO**: ttft <= 0.0022 s and tpot <= 0.0015 s for 50% of requests" in text
    for policy, rows in points.groupby("policy", sort=False):
        meeting = rows[rows["slo_attainment"] >= 0.5]
        assert 0 < len(meeting) < len(rows)  # the SLO holds at the low rates only: a capacity to find
        expected = f"{meeting['request_rate_per_s'].max():.3g}" if len(meeting) else "none"
        assert re.search(rf"\| policy={policy} \| {re.escape(expected)} \|", text), (policy, expected)
    per_scale = points["request_rate_per_s"] / points["request_rate_scale"]
    assert per_scale.max() - per_scale.min() < 1e-3  # the arrivals are the trace's, scaled exactly
    assert points["goodput_requests_per_s"].notna().all()


@pytest.mark.parametrize(("attainments", "answer", "best_rate"), [
    ([1.0, 0.95, 0.5, 0.2], "2", 2.0),
    ([1.0, 0.5, 0.95, 0.2], "1", 1.0),  # passing again past the knee is not capacity
    ([1.0, 0.95, 0.92, 0.91], "at least 8 (the fastest swept)", 8.0),
    ([0.5, 0.95, 0.95, 0.95], "none (below 1, the slowest swept)", None),
])
def test_capacity_is_the_highest_rate_below_the_first_one_that_misses_the_slo(attainments, answer, best_rate):
    from reports.capacity import _capacity

    points = pd.DataFrame({"request_rate_per_s": [1.0, 2.0, 4.0, 8.0], "slo_attainment": attainments})
    best, text = _capacity(points, 0.9)
    assert text == answer
    assert (best is None) if best_rate is None else best["request_rate_per_s"] == best_rate


def test_the_default_baseline_is_a_knob_before_the_load():
    """A vLLM grid over retention x --request-rate-scale compares retention intervals (the load is the
    capacity section's axis), as a grid over policies compares policies."""
    from types import SimpleNamespace

    from reports.axes import choose_baseline

    points = pd.DataFrame({"policy": ["vllm"] * 4, "setting": [(0.5, "none"), (0.5, 0), (1.0, "none"), (1.0, 0)]})
    data = SimpleNamespace(points=points, settings=["request_rate_scale", "retention_interval"],
                           policies=lambda: ["vllm"])
    assert choose_baseline(data, None).label == "retention_interval=none"
    assert choose_baseline(data, "request_rate_scale=1").value == 1.0
