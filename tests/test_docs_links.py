"""The docs hold together: README stays a five-minute read, every relative link (and its #anchor) in
README.md, docs/ and the folders' READMEs points at something that exists, and docs/index.md lists every
page under docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    pages = [REPO / "README.md", REPO / "benchmarks" / "README.md", REPO / "traces" / "README.md"]
    return pages + sorted((REPO / "docs").rglob("*.md"))


def prose_lines(markdown: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked (neither holds links)."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(re.sub(r"`[^`]*`", "``", line))
    return lines


def links(markdown: str) -> list[str]:
    return [target for line in prose_lines(markdown) for target in LINK.findall(line)]


def anchors(markdown: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    found: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = None if fenced else HEADING.match(line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(2).lower()).replace(" ", "-")
            numbered, count = slug, 0
            while numbered in found:
                count += 1
                numbered = f"{slug}-{count}"
            found.add(numbered)
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            broken.append(f"{target}: no such heading")
    return broken


def test_the_readme_is_a_five_minute_read():
    num_lines = len((REPO / "README.md").read_text().splitlines())
    assert num_lines <= README_MAX_LINES, f"README.md has {num_lines} lines; move detail to docs/"


@pytest.mark.parametrize("page", markdown_files(), ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_points_at_something_that_exists(page):
    assert broken_links(page) == []


def test_the_index_lists_every_page_under_docs():
    index = REPO / "docs" / "index.md"
    listed = {(index.parent / target.partition("#")[0]).resolve() for target in links(index.read_text())}
    pages = {page.resolve() for page in (REPO / "docs").rglob("*.md")} - {index.resolve()}
    assert sorted(str(page.relative_to(REPO)) for page in pages - listed) == []


def test_the_link_checker_sees_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "there.md").write_text("# A title: with `code`\n\n## Repeat\n\n## Repeat\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-title-with-code) [ok](there.md#repeat-1) [web](https://example.com/x.md)\n"
        "`[in code](gone.md)`\n```\n[in a fence](gone.md)\n```\n"
        "[gone](gone.md) [bad anchor](there.md#nowhere) [self](#nowhere-here)\n"
    )
    assert broken_links(page) == [
        "gone.md: no such file",
        "there.md#nowhere: no such heading",
        "#nowhere-here: no such heading",
    ]
