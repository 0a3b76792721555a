"""The driver's progress table (runners.backends.progress.render)."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from runners.backends.progress import RunView, render


def _text(renderable: object) -> str:
    buf = io.StringIO()
    Console(file=buf, width=160, force_terminal=False).print(renderable)
    return re.sub(r"\s+", " ", buf.getvalue())


def test_a_table_of_more_runs_than_it_shows_says_how_many_it_left_out(tmp_path: Path) -> None:
    # A 60-run execute closed on a table of 12 rows and no word of the other 48: it read as
    # the whole result.
    views = [RunView(f"run-{i:02d}", 1, state="ok", budget=1e12, flops=1e12) for i in range(20)]
    out = _text(render(views, {"ok": 20}, 20, data=tmp_path / "store"))
    assert out.count("run-") == 12
    assert f"... and 8 more run(s) not shown; `runners status --data {tmp_path / 'store'}` lists every record" in out
    assert "more run(s)" not in _text(render(views[:12], {"ok": 12}, 12, data=tmp_path))
