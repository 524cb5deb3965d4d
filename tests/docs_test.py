"""The README is the door and docs/ the rooms behind it: every relative link in them resolves
(the file exists, and an anchor names one of its headings), and the README stays short.

Links are read with markdown-it-py (CommonMark), so a link-like text inside a code block is
not taken for a link.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

PROJECT = Path(__file__).resolve().parent.parent
README = PROJECT / "README.md"
PAGES = [README, *sorted((PROJECT / "docs").rglob("*.md"))]

MARKDOWN = MarkdownIt("commonmark").enable("table")


def _inline_tokens(tokens: list[Token]) -> list[Token]:
    found: list[Token] = []
    for token in tokens:
        found.append(token)
        if token.children:
            found.extend(_inline_tokens(token.children))
    return found


def links(page: Path) -> list[str]:
    tokens = _inline_tokens(MARKDOWN.parse(page.read_text(encoding="utf-8")))
    return [str(t.attrs["href"]) for t in tokens if t.type == "link_open"]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    tokens = MARKDOWN.parse(page.read_text(encoding="utf-8"))
    return {slug(tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"}


def broken_links(page: Path) -> list[str]:
    broken = []
    for href in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", href) or href.startswith("//"):
            continue  # http(s), mailto ...: not this repository's
        path_part, _, anchor = href.partition("#")
        target = (page.parent / path_part).resolve() if path_part else page
        relative = target.relative_to(PROJECT).as_posix() if target.is_relative_to(PROJECT) else ""
        if not target.exists():
            broken.append(f"{href}: no such file")
            continue
        if anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{href}: no heading #{anchor} in {relative}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(PROJECT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_check_finds_a_broken_link_and_a_wrong_anchor(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading, with: punctuation\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading-with-punctuation) [gone](missing.md) [bad](there.md#nope)\n"
        "```\n[not a link](in-a-code-block.md)\n```\n",
        encoding="utf-8",
    )
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "there.md#nope"]


def test_the_docs_index_links_every_page() -> None:
    linked = {
        (PROJECT / "docs" / href.partition("#")[0]).resolve()
        for href in links(PROJECT / "docs" / "README.md")
    }
    unlisted = [
        page.relative_to(PROJECT).as_posix()
        for page in PAGES[1:]
        if page.name != "README.md" and page.resolve() not in linked
    ]
    assert unlisted == []


def test_the_readme_is_a_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    # The two commands a newcomer needs, and the prerequisite the browser tests have.
    assert re.search(r"^uv run manage\.py up$", text, re.MULTILINE)
    assert re.search(r"^uv run pytest$", text, re.MULTILINE)
    assert "/usr/bin/chromium" in text
