"""User-derived text in a markdown report: a trace's file name, a store's policy names, knob values and code
versions can hold anything (a backtick, ``<img onerror=...>``, ``![](http://...)``), and ``report.md`` is
meant to be pasted into a pull request. Such text goes into the markdown only through here: as a code span
that survives the backticks inside it (CommonMark 6.1: a fence longer than any run of backticks in the text,
padded where the text begins or ends with one), or as plain text with every character that could start
markup backslash-escaped. Both are inert in any CommonMark renderer: no raw HTML, no link, no image.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")
# what can open markup inline: raw HTML and autolinks (<), links and images ([ ] !), code, emphasis (* and
# an _ not between two letters or digits: inside a word, as in knob names, it is literal), entities (&), GFM
# strikethrough (~) and table cells (|). "-", "#", "+" and ">" open blocks only at a line's start, where
# user text never is
_MARKUP = re.compile(r"([\\`*\[\]<!|&~]|(?<![^\W_])_|_(?![^\W_]))")


def one_line(text: object) -> str:
    """``text`` on one line: a newline in it would end a list item or a table row."""
    return re.sub(r"[\r\n\t\v\f]", " ", str(text))


def code_span(text: object, in_table: bool = False) -> str:
    """``text`` as an inline code span, whatever it holds; ``in_table``: a ``|`` escaped for GFM, which would
    split the cell even inside a code span (GFM renders ``\\|`` there as ``|``)."""
    text = one_line(text)
    if in_table:
        text = text.replace("|", "\\|")
    if not text.strip(" "):
        return "`" + (text or " ") + "`"
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def plain(text: object) -> str:
    """``text`` as markdown text that renders as exactly these characters."""
    return _MARKUP.sub(r"\\\1", one_line(text))
