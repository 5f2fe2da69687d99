"""``cli.py report DIR``: a sweep's reuse heatmaps, pool occupancy, cost of retention and seed-style tables,
as markdown (+ PNGs), one self-contained HTML page, or the PNGs alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reports.cost import cost_figure, cost_table
from reports.escape import code_span, plain
from reports.figures import RenderedFigure
from reports.grid_data import FOLLOWUP, GridData, code_warnings, load_grid
from reports.grid_tables import comparison_table, points_table
from reports.header_card import header_card
from reports.heatmaps import heatmap_figures
from reports.occupancy import choose_points, occupancy_figure
from reports.report_formats import FIGURES_DIR, Section, to_html, to_markdown
from reports.why_table import why_table
from sim.atomic import atomic_write, check_output_dir

FORMATS = ("md", "html", "png")


@dataclass(frozen=True)
class Written:
    paths: list[Path]
    warnings: list[str]  # what a reader must know (points from different code): the CLI prints them too


def write_report(
    root: str | Path, baseline: str | None = None, fmt: str = "md", points: list[str] | None = None
) -> Written:
    """Write the report of the sweep in ``root``; returns the files written. ``points`` (keys or unique
    prefixes) chooses the points whose pool occupancy is drawn."""
    if fmt not in FORMATS:
        raise ValueError(f"report format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    _check_outputs(Path(root))
    data = load_grid(root)
    baseline = _baseline(data, baseline)
    sections = build_sections(data, baseline, points)
    card = header_card(data, baseline)
    title = f"Grid report: {Path(data.trace['path']).name}"
    figures = [figure for section in sections for figure in section.figures]
    root = Path(root)
    written = [] if fmt == "html" else [_write_png(root, figure) for figure in figures]
    if fmt == "md":
        written.append(_write_text(root / "report.md", to_markdown(title, card, sections)))
    elif fmt == "html":
        written.append(_write_text(root / "report.html", to_html(title, card, sections)))
    return Written(written, data.skipped + code_warnings(data))


def _check_outputs(root: Path) -> None:
    """The output rule before any work: the report's files, and what figures/ holds (each is rewritten)."""
    check_output_dir(root, ("report.md", "report.html"))
    figures = root / FIGURES_DIR
    check_output_dir(figures, tuple(p.name for p in figures.iterdir()) if figures.is_dir() else ())


def _baseline(data: GridData, baseline: str | None) -> str:
    policies = data.policies()
    if baseline is None:
        return policies[0]
    if baseline not in policies:
        raise ValueError(
            f"--baseline {baseline!r} is not a policy of this grid; it has {', '.join(policies)}"
        )
    return baseline


def build_sections(data: GridData, baseline: str, points: list[str] | None = None) -> list[Section]:
    others = [p for p in data.policies() if p != baseline]
    comparisons = [(f"{baseline} -> {other}", comparison_table(data, baseline, other)) for other in others]
    occupancy_keys = choose_points(data, baseline, points)
    warnings = [f"**Warning**: {plain(warning)}." for warning in data.skipped + code_warnings(data)]
    why = why_table(data)
    return [
        *([Section("Warning", "\n\n".join(warnings))] if warnings else []),
        Section(
            f"Reuse: {baseline} -> each policy",
            _scope_text(data),
            [(code_span(caption), table) for caption, table in comparisons if not table.empty],
        ),
        *([Section("Why tokens were recomputed", _why_text(data), [("", why)])] if why is not None else []),
        Section("Reuse over page size x track interval", figures=heatmap_figures(data, baseline)),
        Section(
            "What retention costs",
            "Reused tokens against peak and mean SWA and MAMBA pool occupancy; the "
            "dashed line is the Pareto frontier (no other point reuses as much for less); each point is "
            "labelled with its setting.",
            [("", cost_table(data))],
            [cost_figure(data)],
        ),
        Section("Pool occupancy over time", figures=[occupancy_figure(data, occupancy_keys)]),
        Section("Every point", "", [("", points_table(data))]),
    ]


def _scope_words(data: GridData) -> str:
    return "the follow-up requests" if data.scope == FOLLOWUP else "all requests"


def _scope_text(data: GridData) -> str:
    counts = sorted(set(data.points["scoped_requests"]))
    return (
        f"Over {_scope_words(data)} ({'/'.join(f'{c:,}' for c in counts)} per point), as `baseline -> other`; "
        "improved / regressed counts requests whose cached tokens rose / fell. The upper bound is the "
        "trace's ideal (an infinite FULL-attention cache at page 1: hits and reused tokens); the gap to it "
        "splits into tokens whose FULL KV was missing (evicted, or its request had not finished), tokens "
        "the previous turn never kept (a MAMBA model's finish stops at its last checkpoint), tokens "
        "blocked by a missing SWA window or MAMBA state, and page rounding (the tree matches whole pages). "
        "Reused / bound counts every served request: the run's reused tokens over the most any policy "
        "could reuse with the point's pools (the Belady optimum for FULL attention under the same FULL "
        "budget, and for hybrids a clairvoyant admission of MAMBA states and SWA windows under the same "
        "budgets; docs/bounds.md)."
    )


def _why_text(data: GridData) -> str:
    return (
        f"Recomputed tokens over {_scope_words(data)}, split by reason (`sim/run/why.py`; per request: the `why` "
        "column of `points/<key>.requests.csv`): blocked with FULL KV there (no MAMBA state at the match "
        "point, SWA freed out of the window by the trigger, by the finish-time trim or by eviction), FULL "
        "KV missing (evicted, never kept, not cached yet), page rounding, and new tokens no earlier "
        "request had."
    )


def _write_png(root: Path, figure: RenderedFigure) -> Path:
    folder = root / FIGURES_DIR
    folder.mkdir(exist_ok=True)
    path = folder / f"{figure.name}.png"
    return atomic_write(path, figure.png)


def _write_text(path: Path, text: str) -> Path:
    atomic_write(path, text)
    return path
