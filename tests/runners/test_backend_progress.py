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


def test_the_head_counts_every_run_it_is_the_total_of(tmp_path: Path) -> None:
    # A run whose retry was not yet running ("retrying") was in no count of the head line:
    # "1 ok, 0 failed, 0 running, 0 queued, 0 already done, of 2".
    views = [RunView("a", 1, state="ok"), RunView("b", 2, state="retrying")]
    out = _text(render(views, {"ok": 1, "retrying": 1}, 2))
    assert "1 ok, 0 failed, 0 running, 1 retrying, 0 queued, 0 already done, of 2" in out
    assert "retrying," not in _text(render(views[:1], {"ok": 1}, 1))
