"""Numbers that fit their heatmap cells: the font shrunk down to a floor, then each cell's short form."""

from __future__ import annotations

import weakref

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

CELL_FONT, MIN_CELL_FONT = 8.0, 6.5  # below 6.5 pt a number is not read at 800 px: a shorter form is used


SHORT_FORMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cell text artist -> its short form


def cell_texts(ax) -> list:
    return [text for text in ax.texts if text.get_gid() == "cell"]


def fit_cell_texts(figure: Figure) -> None:
    """Shrink each panel's cell font until every number fits its cell, down to MIN_CELL_FONT; a panel
    that still does not fit writes its short forms (``94k``, ``1489/`` over ``1500``) at full size."""
    canvas = figure.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # reports draw with Agg (reports/figures.py)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in figure.axes:
        texts = cell_texts(ax)
        if not texts:
            continue
        width = cell_width_px(ax, renderer)
        if not _shrink_to_fit(texts, width, renderer):
            for text in texts:
                text.set_text(SHORT_FORMS.get(text, text.get_text()))
            _shrink_to_fit(texts, width, renderer)


def _shrink_to_fit(texts: list, width: float, renderer) -> bool:
    size = CELL_FONT
    _set_size(texts, size)
    while max(_text_width(t, renderer) for t in texts) > width:
        if size - 0.5 < MIN_CELL_FONT:
            return False
        size -= 0.5
        _set_size(texts, size)
    return True


def _set_size(texts: list, size: float) -> None:
    for text in texts:
        text.set_fontsize(size)


def cell_width_px(ax, renderer) -> float:
    """A cell's width on the canvas, less a margin."""
    columns = len(ax.get_xticks()) or 1
    return 0.92 * ax.get_window_extent(renderer).width / columns


def _text_width(text, renderer) -> float:
    patch = text.get_bbox_patch()
    text.update_bbox_position_size(renderer)
    return (
        patch.get_window_extent(renderer).width
        if patch is not None
        else text.get_window_extent(renderer).width
    )
