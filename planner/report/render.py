"""Markdown and self-contained HTML from one document model.

The report is first laid out as a list of blocks (:class:`Block`): headings, paragraphs,
notes, tables and figures. :func:`to_markdown` and :func:`to_html` render the same blocks,
so both files always say the same thing. The HTML embeds every figure as a base64 PNG,
styles itself inline and names no web address (it must open offline and leak nothing):
text from records, such as error messages, is escaped so that a URL inside it is shown
but cannot become a reference.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Block", "FigureRef", "to_html", "to_markdown"]


@dataclass(frozen=True)
class FigureRef:
    """A saved figure as the report refers to it: title, caption, the PNG's bytes (inlined in
    the html) and the PNG and SVG paths relative to the report (for the markdown)."""
    name: str
    title: str
    caption: str
    png: bytes
    png_path: str  # relative to the report, for markdown
    svg_path: str


@dataclass(frozen=True)
class Block:
    """One piece of a report: a heading (``h1``-``h3``), a paragraph (``p``), a note or
    warning, a table (``headers``, ``rows``, ``flags`` marking rows to highlight) or a
    figure."""
    kind: str  # "h1" "h2" "h3" "p" "note" "warn" "table" "figure"
    text: str = ""
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = ()
    figure: FigureRef | None = None
    flags: Sequence[bool] = field(default_factory=tuple)  # table rows to highlight


# ----------------------------------------------------------------------------- markdown
def _md_cell(text: str) -> str:
    return _md_literal(str(text).replace("|", "\\|").replace("\n", " "))


def _md_text(text: str) -> str:
    """No raw HTML from data: a model name or an error message holding ``<tag ...>`` would
    be markup in a Markdown viewer (report.html escapes everything already)."""
    return str(text).replace("<", "&lt;")


def _md_literal(text: str) -> str:
    """``rho*`` is a name here, never emphasis: escaped, a caption's ``*...*`` italics
    and a flagged row's ``**`` stay intact."""
    return text.replace("*", "\\*")


def to_markdown(blocks: Sequence[Block]) -> str:
    """The report's blocks as markdown (figures linked by their PNG paths)."""
    out: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append(f"{'#' * int(b.kind[1])} {_md_text(b.text)}\n")
        elif b.kind == "p":
            out.append(f"{_md_text(b.text)}\n")
        elif b.kind in ("note", "warn"):
            out.append(f"> {'**Warning:** ' if b.kind == 'warn' else ''}{_md_text(b.text)}\n")
        elif b.kind == "table":
            out.append("| " + " | ".join(_md_text(_md_cell(h)) for h in b.headers) + " |")
            out.append("|" + "---|" * len(b.headers))
            for i, row in enumerate(b.rows):
                mark = "**" if i < len(b.flags) and b.flags[i] else ""
                out.append("| " + " | ".join(f"{mark}{_md_text(_md_cell(c))}{mark}" if c else "" for c in row) + " |")
            out.append("")
        elif b.kind == "figure" and b.figure is not None:
            f = b.figure
            alt = _md_text(f.title).replace("]", "\\]")  # a "]" would end the alt text
            out.append(f"![{alt}]({f.png_path})\n")
            out.append(f"*{_md_text(_md_literal(f.caption))}* ([SVG]({f.svg_path}))\n")
    return "\n".join(out).rstrip() + "\n"


# ----------------------------------------------------------------------------- HTML
def esc(text: str) -> str:
    """HTML-escape, and break ``scheme://`` so no text can read as a web address."""
    return html.escape(str(text), quote=True).replace("://", ":&#47;&#47;")


def _code(escaped: str) -> str:
    """Markdown-style `code` spans (already escaped text) as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1180px;
padding:24px 32px;color:#1d1d1f;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin-top:1.2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.86em;width:100%}
th,td{border:1px solid #d0d0d0;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f2f4f7;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
tr.flag td{background:#fde8e8;font-weight:600}
figure{margin:1em 0 2em}figure img{max-width:100%;height:auto;border:1px solid #e3e3e3}
figcaption{font-size:.85em;color:#444;margin-top:.3em}
.note{background:#eef4fb;border-left:4px solid #4C72B0;padding:8px 12px;margin:.8em 0}
.warn{background:#fff4e5;border-left:4px solid #e08a00;padding:8px 12px;margin:.8em 0;font-weight:600}
code{background:#f2f4f7;padding:0 3px;border-radius:3px}
.cards{overflow-x:auto}.cards table{font-size:.78em}
.cards td:nth-child(n+2):nth-child(-n+7){white-space:nowrap}
"""


def _html_block(b: Block) -> str:
    if b.kind in ("h1", "h2", "h3"):
        anchor = "".join(ch if ch.isalnum() else "-" for ch in b.text.lower()).strip("-")
        return f'<{b.kind} id="{esc(anchor)}">{esc(b.text)}</{b.kind}>'
    if b.kind == "p":
        return f"<p>{_code(esc(b.text))}</p>"
    if b.kind in ("note", "warn"):
        return f'<div class="{b.kind}">{_code(esc(b.text))}</div>'
    if b.kind == "table":
        head = "".join(f"<th>{esc(h)}</th>" for h in b.headers)
        body = []
        for i, row in enumerate(b.rows):
            cls = ' class="flag"' if i < len(b.flags) and b.flags[i] else ""
            body.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
        wrap = ' class="cards"' if "hardware" in b.headers else ""
        return f"<div{wrap}><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    if b.kind == "figure" and b.figure is not None:
        f = b.figure
        data = base64.b64encode(f.png).decode("ascii")
        return (
            f'<figure id="fig-{esc(f.name)}"><img src="data:image/png;base64,{data}" alt="{esc(f.title)}" '
            f'data-figure="{esc(f.name)}"><figcaption>{esc(f.caption)}</figcaption></figure>'
        )
    return ""


def to_html(blocks: Sequence[Block], title: str) -> str:
    """The report's blocks as one self-contained html page (figures inlined, no network)."""
    body = "\n".join(_html_block(b) for b in blocks)
    # icon "data:," stops the browser from asking for /favicon.ico (a console error offline).
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
