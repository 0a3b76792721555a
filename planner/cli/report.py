"""``planner report``: the regime-classification report of a campaign."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import check_output_file, command

__all__ = ["report"]


@command(name="report")
def report(
    data: Annotated[Path, typer.Option("--data", help="Campaign directory (the pilot store).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for report.md, report.html, "
                                                   "regimes.json and figures/.")],
    target: Annotated[str | None, typer.Option(
        "--target", help="Primary target: native | pass1 | judge (default: the race's, else native)."
    )] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Write the regime-classification report of the runs in --data: report.md, a self-contained report.html, regimes.json and figures (PNG and SVG)."""
    from planner.errors import ConfigError
    from planner.report import build_report
    from planner.schema import TARGETS

    if target is None:
        from planner.report.data import read_race

        race, _ = read_race(data)
        target = str(race.get("target", "native")) if race else "native"
    if target not in TARGETS:
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out: {str(out)!r} is a file; pass a directory for the report")
    if data.exists() and out.resolve() == data.resolve():
        # The report writes its own regimes.json: in the data directory it would replace the race's.
        raise ConfigError(f"out: {str(out)!r} is the data directory; the report's regimes.json would replace "
                          f"the race's there, so give another directory (e.g. {str(data / 'report')!r})")
    check_output_file(out / "report.md", "out")
    res = build_report(data, out, target=target, progress=not quiet)
    for w in res.warnings:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(res.message)
    typer.echo(f"report: {res.html}")
    typer.echo(f"        {res.markdown}")
    typer.echo(f"        {res.regimes} ({len(res.figures) // 2} figures in {out / 'figures'})")
