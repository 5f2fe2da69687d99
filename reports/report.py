"""``cli.py report DIR``: a sweep's reuse heatmaps, pool occupancy, cost of retention and seed-style tables,
as markdown (+ PNGs), one self-contained HTML page, or the PNGs alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reports.axes import Baseline, choose_baseline
from reports.capacity import capacity_sections
from reports.cost import cost_figure, cost_table, costs
from reports.escape import plain
from reports.figures import RenderedFigure
from reports.grid_data import FOLLOWUP, GridData, code_warnings, load_grid
from reports.grid_tables import POINTS_LEGEND, comparison_table, legend, points_table, served_note
from reports.header_card import header_card
from reports.heatmaps import heatmap_figures, layout_of
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
    """Write the report of the sweep in ``root``; returns the files written. ``baseline``: ``AXIS=VALUE`` (or
    a policy's name) every other value of that axis is compared with; ``points`` (keys or unique prefixes)
    chooses the points whose pool occupancy is drawn."""
    if fmt not in FORMATS:
        raise ValueError(f"report format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    _check_outputs(Path(root))
    data = load_grid(root)
    chosen = choose_baseline(data, baseline)
    drawn = choose_points(data, chosen, points)  # a bad --points is refused before any figure is drawn
    sections = build_sections(data, chosen, drawn)
    card = header_card(data, chosen)
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


def build_sections(
    data: GridData, baseline: Baseline | None, points: list[str] | None = None
) -> list[Section]:
    warnings = [f"**Warning**: {plain(warning)}." for warning in data.skipped + code_warnings(data)]
    why = why_table(data)
    retention = cost_table(data) if costs(data) else None
    return [
        *([Section("Warning", "\n\n".join(warnings))] if warnings else []),
        *comparison_sections(data, baseline),
        *([Section("Why tokens were recomputed", _why_text(data), [("", why)])] if why is not None else []),
        *capacity_sections(data, baseline),
        *(
            [Section("What retention costs", COST_TEXT, [("", retention)], [cost_figure(data)])]
            if retention is not None
            else []
        ),
        Section(
            "Pool occupancy over time",
            figures=[occupancy_figure(data, choose_points(data, baseline, points))],
        ),
        Section("Every point", POINTS_LEGEND, [("", points_table(data))]),
    ]


def comparison_sections(data: GridData, baseline: Baseline | None) -> list[Section]:
    """The comparison table and its heatmaps; none for a grid of one point."""
    if baseline is None:
        return []
    table = comparison_table(data, baseline)
    note = served_note(data, baseline)
    text = "\n\n".join(filter(None, [legend(data, baseline), note]))
    sections = [Section(f"Reuse: {baseline.label} -> each other {baseline.axis}", text, [("", table)])]
    maps = heatmap_figures(data, baseline)
    laid_out = layout_of(data, baseline)
    if maps and laid_out is not None:  # figures exist only where a layout does
        layout, _ = laid_out
        over = " x ".join(a.replace("_", " ") for a in (layout.y, layout.x) if a)
        sections.append(Section(f"Reuse over {over}, by {baseline.axis}", figures=maps))
    return sections


COST_TEXT = (
    "Reused tokens against peak and mean pool occupancy of the retained components; the dashed line is the "
    "Pareto frontier (no other point reuses as much for less); each point is labelled with its setting."
)


def _scope_words(data: GridData) -> str:
    return "the follow-up requests" if data.scope == FOLLOWUP else "all requests"


def _why_text(data: GridData) -> str:
    return (
        f"Recomputed tokens over {_scope_words(data)}, split by reason (`sim/run/why.py`; per request: the `why` "
        "column of `points/<key>.requests.csv`): blocked with FULL KV there (no MAMBA state at the match "
        "point, SWA freed out of the window by the trigger, by the finish-time trim or by eviction), FULL "
        "KV missing (evicted, never kept, not cached yet), page rounding, and new tokens no earlier "
        "request had. vLLM: *retention* is a state or window block its retention interval left unhashed, page "
        "rounding its block alignment (docs/user-guide.md, the why reasons)."
    )


def _write_png(root: Path, figure: RenderedFigure) -> Path:
    folder = root / FIGURES_DIR
    folder.mkdir(exist_ok=True)
    path = folder / f"{figure.name}.png"
    return atomic_write(path, figure.png)


def _write_text(path: Path, text: str) -> Path:
    atomic_write(path, text)
    return path
