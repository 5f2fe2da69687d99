"""The HTML report: its structure as written, and as a real browser (headless Chromium) renders it."""
from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.report import write_report
from sim.grid.axes import expand, parse_axes
from sim.grid.sweep import run_grid
from sim.trace import write_trace
from sim.trace.generate import s1

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("html")
    write_trace(s1(num_prompts=4), root / "s1.jsonl")
    configs = expand(parse_axes({"policy": "sglang,sglang-retain", "page_size": "128", "track_interval": "128,256",
                                 "chunked_prefill_size": "16384", "pool_tokens": "4000000", "mamba_states": "4096"}))
    run_grid(root / "s1.jsonl", configs, root / "out", jobs=1, progress=False)
    write_report(root / "out", fmt="html")
    return root / "out" / "report.html"


class Page(HTMLParser):
    """What a reader sees: text outside code, tables, cells with their classes, images, header cells."""

    def __init__(self, text: str):
        super().__init__()
        self.stack: list[str] = []
        self.text: list[str] = []
        self.tables, self.images, self.headers, self.cells = [], [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag not in ("img", "meta", "br"):
            self.stack.append(tag)
        {"table": self.tables, "img": self.images, "th": self.headers, "td": self.cells}.get(tag, []).append(attrs)

    def handle_endtag(self, tag):
        if tag in self.stack:
            del self.stack[len(self.stack) - 1 - self.stack[::-1].index(tag):]

    def handle_data(self, data):
        if not {"code", "script", "style"} & set(self.stack):
            self.text.append(data)


def check_page(page: Page) -> None:
    text = "".join(page.text)
    assert "`" not in text  # markdown rendered: no literal backticks
    assert len(page.tables) >= 5 and page.tables[0]["class"] == "card"
    assert all(t["class"] == "sortable" for t in page.tables[1:])
    kinds = {cell.get("class") for cell in page.cells}
    assert {"num", "key", "text short"} <= kinds  # numbers right, keys unwrapped, short text unwrapped
    assert len(page.images) == 6 and all(i["src"].startswith("data:image/png;base64,") for i in page.images)
    for phrase in ("pools (capacity)", "ideal reuse", "evictions", "nodes", "code", "4,000,000 tokens"):
        assert phrase in text, phrase


def test_the_written_page_has_rendered_text_typed_cells_and_a_header_card(report_html):
    check_page(Page(report_html.read_text()))


def browser() -> str | None:
    named = os.environ.get("HYBRIDCACHE_BROWSER")
    return named or next((found for name in BROWSERS if (found := shutil.which(name))), None)


def run_browser(*args: str) -> subprocess.CompletedProcess:
    command = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--virtual-time-budget=5000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(browser() is None, reason="no headless browser: install Debian's chromium (apt-get install "
                                              "chromium) or set HYBRIDCACHE_BROWSER to one")
def test_a_real_browser_renders_the_report(report_html, tmp_path):
    url = report_html.resolve().as_uri()
    dumped = run_browser("--dump-dom", url)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    page = Page(dumped.stdout)
    check_page(page)
    assert [image.get("data-loaded") for image in page.images] == ["yes"] * 6  # every figure decoded
    assert all(header.get("aria-sort") == "none" for header in page.headers if "data-type" in header)  # script ran
    shot = tmp_path / "report.png"
    taken = run_browser("--window-size=1000,2400", f"--screenshot={shot}", url)
    assert taken.returncode == 0 and shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000
    saved = os.environ.get("HYBRIDCACHE_ARTIFACTS")  # CI keeps the screenshot for a person to look at
    if saved:
        Path(saved).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(saved) / "report-screenshot.png")


CLICK_A_HEADER = """<script>
window.addEventListener("load", function () {
  const table = document.querySelectorAll("table.sortable")[1];  // why: point, policy, ..., recomputed tokens
  const header = Array.from(table.querySelectorAll("th")).find(h => h.textContent.trim() === "recomputed tokens");
  const column = Array.from(header.parentNode.children).indexOf(header);
  header.click();
  const shown = Array.from(table.tBodies[0].rows).map(r => r.cells[column].textContent.trim());
  document.body.dataset.sorted = JSON.stringify(shown);
  document.body.dataset.sort = header.getAttribute("aria-sort");
});
</script>"""


def allow_script(page: str, script: str) -> str:
    """``page`` whose Content-Security-Policy also allows the inline ``script`` (a test's own)."""
    inner = script.split(">", 1)[1].rsplit("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(inner.encode()).digest()).decode()
    return page.replace("script-src ", f"script-src 'sha256-{digest}' ", 1)


@pytest.mark.skipif(browser() is None, reason="no headless browser: install Debian's chromium (apt-get install "
                                              "chromium) or set HYBRIDCACHE_BROWSER to one")
def test_a_click_on_a_header_sorts_the_table_by_number(report_html, tmp_path):
    clicked = tmp_path / "clicked.html"
    clicked.write_text(allow_script(report_html.read_text(), CLICK_A_HEADER).replace("</body>", CLICK_A_HEADER + "</body>"))
    dumped = run_browser("--dump-dom", clicked.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    body = re.search(r'<body[^>]*data-sorted="([^"]*)"[^>]*>', dumped.stdout)
    assert body and 'data-sort="ascending"' in body.group(0)
    shown = [int(value.replace(",", "")) for value in json.loads(html.unescape(body.group(1)))]
    assert len(shown) == 4 and shown == sorted(shown) and shown != sorted(shown, reverse=True)


@pytest.mark.skipif(browser() is None, reason="no headless browser: install Debian's chromium (apt-get install "
                                              "chromium) or set HYBRIDCACHE_BROWSER to one")
def test_the_page_loads_nothing_from_outside_even_with_an_image_planted_in_it(report_html, tmp_path):
    """An image injected into the page (as a trace name once could) is blocked by the page's policy; the
    same page without the policy loads it, so the probe can tell."""
    probe = tmp_path / "probe.png"
    shutil.copy(next((report_html.parent / "figures").glob("*.png"), None) or _one_png(tmp_path), probe)
    planted = report_html.read_text().replace("<h1>", f'<img id="probe" alt="probe" src="{probe.as_uri()}"><h1>', 1)
    loaded = {}
    for name, page in (("with", planted), ("without", re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>',
                                                              "", planted))):
        (tmp_path / f"{name}.html").write_text(page)
        dumped = run_browser("--dump-dom", (tmp_path / f"{name}.html").as_uri())
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        probe_tag = re.search(r'<img[^>]*id="probe"[^>]*>', dumped.stdout).group(0)
        loaded[name] = re.search(r'data-loaded="(\w+)"', probe_tag).group(1)
    assert loaded == {"with": "no", "without": "yes"}


def _one_png(folder: Path) -> Path:
    from reports.figures import new_figure, render

    figure, _ = new_figure(1.0)
    path = folder / "one.png"
    path.write_bytes(render(figure, "one", "").png)
    return path
