"""Rendering report blocks: data never becomes markup in report.md or report.html."""

from __future__ import annotations

from planner.report.render import Block, to_html, to_markdown

EVIL = "<img src=x onerror=alert(1)>"


def test_markup_in_data_is_text_in_both_renderings() -> None:
    doc = [Block("h2", f"Setting {EVIL}"), Block("p", f"error: {EVIL}"),
           Block("table", headers=["model", "error"], rows=[[EVIL, "a | b"]], flags=[True])]
    md = to_markdown(doc)
    assert "<img" not in md and md.count("&lt;img") == 3
    assert "a \\| b" in md and "**" in md  # cells stay cells, the flagged row stays bold
    html = to_html(doc, "t")
    assert "<img src=x" not in html and "&lt;img" in html
