"""A report's sections written out: markdown (figures as PNG files beside it) or one self-contained HTML
page (figures embedded as base64 PNG)."""
from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field

import pandas as pd

from reports.figures import RenderedFigure
from reports.tables import markdown

FIGURES_DIR = "figures"


@dataclass
class Section:
    title: str
    text: str = ""
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # (caption, table)
    figures: list[RenderedFigure] = field(default_factory=list)


def to_markdown(title: str, sections: list[Section]) -> str:
    parts = [f"# {title}"]
    for section in sections:
        parts.append(f"## {section.title}")
        if section.text:
            parts.append(section.text)
        for caption, table in section.tables:
            parts.append(f"{caption}\n\n{markdown(table)}" if caption else markdown(table))
        for figure in section.figures:
            parts.append(f"![{figure.caption}]({FIGURES_DIR}/{figure.name}.png)")
    return "\n\n".join(parts) + "\n"


def to_html(title: str, sections: list[Section]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for section in sections:
        body.append(f"<h2>{html.escape(section.title)}</h2>")
        if section.text:
            body.append(f"<p>{html.escape(section.text)}</p>")
        for caption, table in section.tables:
            body.append(f"<p><b>{html.escape(caption)}</b></p>" if caption else "")
            body.append(table.to_html(index=False, escape=True, border=0))
        for figure in section.figures:
            data = base64.b64encode(figure.png).decode("ascii")
            body.append(f'<figure><img alt="{html.escape(figure.caption)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{html.escape(figure.caption)}</figcaption></figure>")
    return _PAGE.format(title=html.escape(title), body="\n".join(part for part in body if part))


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }}
img {{ max-width: 100%; }}
figcaption {{ font-size: 0.85em; color: #555; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""
