"""Shared figure plumbing: the Agg backend, PR-width sizing, and a figure rendered to PNG bytes."""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib
import numpy as np

matplotlib.use("Agg")  # reports are written, never shown; no display is needed or wanted
# a figure's text is data (policy names, knob values from a store), never mathtext: "$" is a dollar sign
matplotlib.rcParams["text.parse_math"] = False

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402

from reports.formatting import abbreviated  # noqa: E402

WIDTH_IN = 8.0  # a pull request's text column: readable without zooming
DPI = 100  # 8 in x 100 dpi = 800 px, the width a pull request shows an image at
POLICY_COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
# hollow markers, each policy's smaller than the one before: points that coincide stay visible, nested
POLICY_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


@dataclass(frozen=True)
class RenderedFigure:
    name: str  # file stem: figures/<name>.png
    caption: str
    png: bytes


def new_figure(height_in: float, nrows: int = 1, ncols: int = 1, **kwargs) -> tuple[Figure, np.ndarray]:
    """A figure and its axes as a 2-D array (squeezed never), PR width."""
    return plt.subplots(nrows, ncols, figsize=(WIDTH_IN, height_in), dpi=DPI, squeeze=False, **kwargs)


def policy_marker(policies: list[str], policy: str) -> tuple[str, float]:
    """(marker, size in points^2): the first policy's largest."""
    index = policies.index(policy)
    return POLICY_MARKERS[index % len(POLICY_MARKERS)], max(30.0, 150.0 - 40.0 * index)


def render(figure: Figure, name: str, caption: str) -> RenderedFigure:
    """PNG bytes with no timestamp or version in the metadata, so the same data gives the same bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(figure)
    return RenderedFigure(name, caption, buffer.getvalue())


def policy_color(policies: list[str], policy: str) -> str:
    return POLICY_COLORS[policies.index(policy) % len(POLICY_COLORS)]


thousands = abbreviated  # tick labels: 124416 -> 124.4k
