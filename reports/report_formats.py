"""A report's header card and sections written out: markdown (figures as PNG files beside it) or one
self-contained HTML page (figures embedded as base64 PNG; section text rendered from markdown; numbers
right-aligned, text left-aligned; every table sortable by a click on its header).

The page loads nothing from outside, whatever a store holds: its Content-Security-Policy allows images only
from ``data:`` URLs, its own style sheet and script only (by their sha256), and nothing else (no fetch, no
frame, no form, no base URL). User-derived text reaches it escaped (``reports/escape.py``, ``html.escape``)."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from reports.escape import plain
from reports.figures import RenderedFigure
from reports.tables import cell_text, column_kind, markdown

FIGURES_DIR = "figures"


@dataclass
class Section:
    title: str
    text: str = ""  # markdown
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # (caption, table)
    figures: list[RenderedFigure] = field(default_factory=list)


Card = list[tuple[str, str]]  # (label, markdown value): the report's header


def to_markdown(title: str, card: Card, sections: list[Section]) -> str:
    """The report as markdown; each figure a PNG in ``figures/`` named under its image, for uploading."""
    parts = [f"# {plain(title)}", "\n".join(f"- **{label}**: {value}" for label, value in card)]
    names = [f"{FIGURES_DIR}/{figure.name}.png" for section in sections for figure in section.figures]
    if names:
        parts.append(upload_note(names))
    for section in sections:
        parts.append(f"## {plain(section.title)}")
        if section.text:
            parts.append(section.text)
        for caption, table in section.tables:
            parts.append(f"{caption}\n\n{markdown(table)}" if caption else markdown(table))
        for figure in section.figures:
            path = f"{FIGURES_DIR}/{figure.name}.png"
            parts.append(f"![{plain(figure.caption)}]({path})\n*{path}*")
    return "\n\n".join(parts) + "\n"


def upload_note(names: list[str]) -> str:
    """A pull request shows no image a relative link points at: the files must be uploaded into it."""
    return (
        f"> **Figures**: {len(names)} PNG files beside this report ({', '.join(f'`{n}`' for n in names)}). A pull "
        "request does not show them from these relative links: drag each file into the comment box (GitHub "
        "uploads it and writes its link) in place of the image line that names it; `report --format html` "
        "writes one page with every figure embedded."
    )


def _render_markdown(text: str, inline: bool = False) -> str:
    from markdown_it import MarkdownIt  # rich's dependency: always installed with the project

    renderer = MarkdownIt("commonmark", {"html": False})
    return renderer.renderInline(text) if inline else renderer.render(text)


def to_html(title: str, card: Card, sections: list[Section]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>", _card_html(card)]
    for section in sections:
        body.append(f"<h2>{html.escape(section.title)}</h2>")
        if section.text:
            body.append(_render_markdown(section.text))
        for caption, table in section.tables:
            if caption:
                body.append(f'<p class="caption">{_render_markdown(caption, inline=True)}</p>')
            body.append(html_table(table))
        for figure in section.figures:
            data = base64.b64encode(figure.png).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(figure.caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(figure.caption)}</figcaption></figure>"
            )
    values = {
        "title": html.escape(title),
        "body": "\n".join(body),
        "csp": CONTENT_SECURITY_POLICY,
        "style": _STYLE,
        "script": _SCRIPT,
    }
    # one pass over the template: a "{script}" in a user's text is never replaced
    return _SLOT.sub(lambda match: values[match.group(1)], _PAGE)


def _card_html(card: Card) -> str:
    rows = "".join(
        f'<tr><th scope="row">{html.escape(label)}</th><td>{_render_markdown(value, inline=True)}</td></tr>'
        for label, value in card
    )
    return f'<table class="card"><tbody>{rows}</tbody></table>'


def html_table(frame: pd.DataFrame) -> str:
    columns = [[cell_text(v) for v in frame[name]] for name in frame.columns]
    kinds = [column_kind(name, cells) for name, cells in zip(frame.columns, columns, strict=True)]
    head = "".join(
        f'<th scope="col" data-type="{kind}">{html.escape(str(name))}</th>'
        for name, kind in zip(frame.columns, kinds, strict=True)
    )
    rows = []
    for i in range(len(frame)):
        cells = []
        for cells_of, kind in zip(columns, kinds, strict=True):
            text = html.escape(cells_of[i])
            cells.append(
                f'<td class="key"><code>{text}</code></td>'
                if kind == "key"
                else f'<td class="{kind}">{text}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _source_hash(text: str) -> str:
    """A CSP source for exactly this inline style sheet or script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


_STYLE = (Path(__file__).parent / "report.css").read_text(encoding="utf-8")
_SCRIPT = (Path(__file__).parent / "report.js").read_text(encoding="utf-8")
# the <style> and <script> elements below hold a newline and then these texts
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; img-src data:; style-src {_source_hash(chr(10) + _STYLE)}; "
    f"script-src {_source_hash(chr(10) + _SCRIPT)}; base-uri 'none'; form-action 'none'"
)
_SLOT = re.compile(r"\{(title|body|csp|style|script)\}")
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{style}</style>
</head>
<body>
{body}
<script>
{script}</script>
</body>
</html>
"""
