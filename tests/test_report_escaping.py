"""User-derived text in reports and tables: a markdown code span survives the backticks in it, plain text
renders as exactly itself (no HTML, link or image), the HTML page's Content-Security-Policy names its own
style and script and nothing else, and a CSV cell never starts a spreadsheet formula yet reads back exactly."""
from __future__ import annotations

import base64
import hashlib
import html
import io
import re

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from reports.escape import code_span, plain
from reports.report_formats import CONTENT_SECURITY_POLICY, Section, to_html, to_markdown
from reports.tables import markdown
from sim.run.tables_io import csv_read_back, csv_text

HOSTILE = st.text(alphabet=st.sampled_from("`*_[]()<>!|&~\\#-+=@ \t\nab/:;\"'"), max_size=30) | st.text(max_size=30)
MARKDOWN = MarkdownIt("commonmark", {"html": True})  # raw HTML on, as a pull request's renderer allows some
FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def seen(text: str) -> str:
    """``text`` as a CommonMark renderer may show it at best: on one line, NUL as U+FFFD (its rule)."""
    return re.sub(r"[\r\n\t\v\f]", " ", text).replace("\x00", "\ufffd")


def rendered_text(fragment: str) -> str:
    """What a reader sees of an inline markdown fragment: the text, tags stripped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", MARKDOWN.renderInline(fragment)))


@FUZZ
@given(HOSTILE)
def test_a_code_span_shows_exactly_its_text_whatever_it_holds(text):
    out = MARKDOWN.renderInline(code_span(text))
    assert out.startswith("<code>") and out.endswith("</code>") and out.count("<code>") == 1
    shown = html.unescape(out[len("<code>"):-len("</code>")])
    assert shown == seen(text) or not text.strip()


@FUZZ
@given(HOSTILE)
def test_plain_text_renders_as_itself_with_no_tag_of_its_own(text):
    out = MARKDOWN.renderInline(plain(text))
    assert not re.search(r"<(?!/?(?:br|code))[a-z]", out)  # no tag came from the text: no img, a, script, em
    assert rendered_text(plain(text)).strip(" ") == seen(text).strip(" ")


def test_a_table_cell_cannot_split_its_row_or_open_html():
    frame = pd.DataFrame({"policy": ["a|b", "<img src=x onerror=alert(1)>", "![p](https:evil.example)"]})
    table = markdown(frame)
    rows = table.splitlines()[2:]
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 2 for row in rows)  # one cell each: outer pipes only
    assert "<img" not in MARKDOWN.render(table).replace("&lt;img", "")


def test_the_page_policy_allows_its_own_style_and_script_only():
    page = to_html("t", [("trace", code_span("x"))], [Section("s", "text")])
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)

    def source(text):
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert f'content="{CONTENT_SECURITY_POLICY}"' in page
    assert f"style-src {source(style)};" in CONTENT_SECURITY_POLICY
    assert f"script-src {source(script)};" in CONTENT_SECURITY_POLICY
    assert CONTENT_SECURITY_POLICY.startswith("default-src 'none'; img-src data:;")


def test_a_slot_name_in_user_text_is_never_filled():
    page = to_html("{script} {style}", [("trace", code_span("{body}{csp}"))], [Section("{title}", "{script}")])
    assert page.count("function sortTable") == 1 and page.count("<style>") == 1
    assert "{body}{csp}" in page and "<h2>{title}</h2>" in page


def test_the_markdown_report_escapes_its_title_and_sections():
    text = to_markdown("Grid report: x<img src=y>", [], [Section("Reuse: <b>a</b> -> c")])
    assert "<img" not in MARKDOWN.render(text).replace("&lt;img", "")
    assert "<b>" not in MARKDOWN.render(text)


@FUZZ
@given(st.lists(HOSTILE, min_size=1, max_size=6))
def test_csv_cells_never_start_a_formula_and_read_back_exactly(ids):
    frame = pd.DataFrame({"id": ids, "cached_tokens": range(len(ids))})
    text = csv_text(frame)
    back = csv_read_back(pd.read_csv(io.StringIO(text), dtype={"id": str}, keep_default_na=False), ("id",))
    assert list(back["id"]) == ids
    for value in pd.read_csv(io.StringIO(text), dtype={"id": str}, keep_default_na=False)["id"]:
        assert not value.startswith(("=", "+", "@", "\t", "\r")) and not re.match(r"-(?![\d.])", value)


def test_simulate_markdown_names_a_hostile_trace_as_text(tmp_path):
    from tests.bad_input_helpers import GOOD_LINES, invoke, lines_text

    path = tmp_path / "t`<img src=x onerror=alert(1)>`![p](https:evil.example).jsonl"
    path.write_text(lines_text(*GOOD_LINES))
    result = invoke(["simulate", "--trace", path, "--mode", "replay", "--format", "md"])
    assert result.exit_code == 0, result.output
    rendered = MARKDOWN.render(result.output)
    assert "<img" not in rendered.replace("&lt;img", "")  # the name shown as text, no tag of its own
    assert html.unescape(re.sub(r"<[^>]*>", "", rendered)).count(path.name) == 1
