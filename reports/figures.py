"""Shared figure plumbing: the Agg backend, PR-width sizing, and a figure rendered to PNG bytes."""
from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # reports are written, never shown; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402

WIDTH_IN = 8.0  # a pull request's text column: readable without zooming
DPI = 100
POLICY_COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


@dataclass(frozen=True)
class RenderedFigure:
    name: str  # file stem: figures/<name>.png
    caption: str
    png: bytes


def new_figure(height_in: float, nrows: int = 1, ncols: int = 1, **kwargs) -> tuple[Figure, object]:
    return plt.subplots(nrows, ncols, figsize=(WIDTH_IN, height_in), dpi=DPI, squeeze=False, **kwargs)


def render(figure: Figure, name: str, caption: str) -> RenderedFigure:
    """PNG bytes with no timestamp or version in the metadata, so the same data gives the same bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(figure)
    return RenderedFigure(name, caption, buffer.getvalue())


def policy_color(policies: list[str], policy: str) -> str:
    return POLICY_COLORS[policies.index(policy) % len(POLICY_COLORS)]


def thousands(value: float, digits: int = 4) -> str:
    """Tick and cell labels: 124416 -> 124.4k, 4000000 -> 4M, 98.25 stays 98.25."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.{digits}g}M"
    if abs(value) >= 10_000:
        return f"{value / 1000:.{digits}g}k"
    return f"{value:g}"
