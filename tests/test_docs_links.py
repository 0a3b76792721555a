"""The README's and docs' relative links resolve: each linked file exists and each
``#anchor`` names a heading of its file (GitHub's slugs), so a contents list or a moved
figure cannot rot unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces -> -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no headings inside code
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, flags=re.M)}


def test_slugs_follow_githubs_rule() -> None:
    assert slug("Run noise: the `sd*` mark, `--seeds 2` and `--noise-sd`") == "run-noise-the-sd-mark---seeds-2-and---noise-sd"
    assert slug("What a duel can tell, and what a shape fit tells more") == "what-a-duel-can-tell-and-what-a-shape-fit-tells-more"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: link to {target!r}: no such file"
        if anchor:
            assert anchor in anchors(dest), f"{page.name}: link to {target!r}: no such heading in {dest.name}"
