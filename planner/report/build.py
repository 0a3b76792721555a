"""``build_report``: a campaign directory in, the report files out.

Writes into ``out``: ``report.md``, ``report.html`` (self-contained), ``regimes.json``
and ``figures/<name>.png|.svg``. Long steps (surrogate fits, figures) show a ``rich``
progress display on stderr when ``progress`` is on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.files import atomic_write_text, dumps_json, shown_path
from planner.schema import TARGETS

__all__ = ["ReportResult", "build_report", "is_earlier_report"]


@dataclass(frozen=True)
class ReportResult:
    """What ``build_report`` wrote: the report folder, its markdown, html and regimes.json, the
    figure files, a ``status`` (``ok``, ``empty``, ``all-failed`` or ``no-fit``) with its
    ``message``, and what was skipped (``warnings``)."""
    out: Path
    markdown: Path
    html: Path
    regimes: Path
    figures: list[Path] = field(default_factory=list)  # PNG and SVG
    status: str = "ok"  # ok | empty | all-failed | no-fit
    message: str = ""
    warnings: list[str] = field(default_factory=list)  # what was skipped (also in the report)


def _atomic_write(path: Path, text: str) -> None:
    atomic_write_text(path, text)  # a browser reloading the page never sees half a report


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A rich Progress on stderr, or a stand-in with the same two methods when disabled."""
    if not enabled:
        class _Quiet:
            def add_task(self, *_a: Any, **_k: Any) -> int:
                return 0

            def update(self, *_a: Any, **_k: Any) -> None:
                return None

        yield _Quiet()
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=False) as prog:
        yield prog


def build_report(
    data_dir: str | Path,
    out: str | Path,
    *,
    target: str = "native",
    targets: Sequence[str] = TARGETS,
    progress: bool = False,
) -> ReportResult:
    """Build the regime-classification report of the campaign in ``data_dir`` into ``out``.

    Never fails on an empty or all-failed dataset: the files are written and say so.
    Raises :class:`~planner.errors.ConfigError` for a missing data directory or an
    unknown target.
    """
    from planner.errors import ConfigError
    from planner.report.data import assemble, check_campaign_dir
    from planner.report.document import (
        added_since_race,
        blocks,
        regimes_json,
        status_line,
        status_of,
    )
    from planner.report.figures import all_figures, n_figures, save
    from planner.report.render import FigureRef, to_html, to_markdown

    # Bad input fails before any progress display starts: one clean error line.
    if target not in targets or any(t not in TARGETS for t in targets):
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")
    check_campaign_dir(data_dir)
    out = Path(out)
    with _progress(progress) as prog:
        steps = 2 + 2 * len(targets)
        task = prog.add_task("report", total=steps)
        done = 0

        def step(msg: str) -> None:
            nonlocal done
            prog.update(task, description=msg, completed=min(done, steps))
            done += 1

        data = assemble(data_dir, target, targets=targets, step=step)
        prog.update(task, description="data ready", completed=steps)

        import matplotlib

        matplotlib.use("Agg", force=True)  # no display needed; no pyplot state is used either
        ftask = prog.add_task("figures", total=max(1, n_figures(data)))
        specs = all_figures(data, tick=lambda: prog.update(ftask, advance=1))
        prog.update(ftask, description="saving figures")
        fig_dir = out / "figures"
        # Only figures the earlier report drew are its own to replace: a user's files in
        # figures/ stay.
        earlier = _figures_of(out) if is_earlier_report(out) else set()
        out.mkdir(parents=True, exist_ok=True)
        figs: dict[str, list[FigureRef]] = {}
        paths: list[Path] = []
        for spec in specs:
            png, svg, raw = save(spec, fig_dir)
            paths += [png, svg]
            figs.setdefault(spec.section, []).append(
                FigureRef(spec.name, spec.title, spec.caption, raw,
                          png.relative_to(out).as_posix(), svg.relative_to(out).as_posix())
            )
        for stale in earlier - set(paths):  # an earlier report's figure this one no longer draws
            stale.unlink(missing_ok=True)
        # The bar counted the figures tried; some have no data to draw (say which were).
        prog.update(ftask, description=f"figures: {len(specs)} drawn", completed=max(1, n_figures(data)))

        doc = blocks(data, figs)
        md, page, reg = out / "report.md", out / "report.html", out / "regimes.json"
        _atomic_write(md, to_markdown(doc))
        # The store's folder with its parent: a browser tab reading "data" named no campaign.
        whole = data.data_dir.resolve()
        named = Path(*whole.parts[-2:]) if whole.name else whole
        _atomic_write(page, to_html(doc, f"RACE regime report: {shown_path(named)}"))
        _atomic_write(reg, dumps_json(regimes_json(data), indent=2) + "\n")
    warnings = [*data.mixed, *data.notes]
    if added := added_since_race(data):
        # Said in the report too; here so a terminal or a log sees it without opening it.
        warnings.append(f"the store holds {added} attempt(s) of the race's settings more than its regimes.json "
                        "counts (an interrupted resume, or `runners execute` after it): the race's calls are older "
                        "than the report's refit; rerun the race's command to bring them up to date")
    if data.corrupt:
        warnings.append(f"{len(data.corrupt)} unreadable record file(s) in {data.data_text} were skipped (first: "
                        f"{data.corrupt[0][0]}); `runners status --data {data.data_text}` lists them")
    return ReportResult(out, md, page, reg, paths, status_of(data), status_line(data), warnings)


def _figures_of(out: Path) -> set[Path]:
    """The figure files an earlier report in ``out`` links (PNG and SVG), by its pages."""
    import re

    found: set[Path] = set()
    for page in ("report.md", "report.html"):
        try:
            text = (out / page).read_text(errors="replace")
        except OSError:
            continue
        for name in re.findall(r"figures/([\w.-]+)\.(?:png|svg)", text):
            found |= {out / "figures" / f"{name}.png", out / "figures" / f"{name}.svg"}
    return found


def is_earlier_report(out: Path) -> bool:
    """Whether ``out`` holds an earlier report (its regimes.json says so): only then are
    figures in ``out/figures`` the report's own to replace."""
    import json

    try:
        return json.loads((out / "regimes.json").read_text()).get("generated_by") == "planner report"
    except Exception:
        return False
