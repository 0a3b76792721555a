"""``planner report``: the regime-classification report of a campaign."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import command
from planner.cli.paths import check_not_store_folder, check_output_file, is_store_folder, path_value

__all__ = ["report"]


@command(name="report")
def report(
    data: Annotated[Path, typer.Option("--data", parser=path_value, help="Campaign directory (the pilot store).")],
    out: Annotated[Path | None, typer.Option("--out", parser=path_value, help="Directory for report.md, report.html, "
                                                          "regimes.json and figures/ (default: DATA/report).")] = None,
    target: Annotated[str | None, typer.Option(
        "--target", help="Primary target: native | pass1 | judge (default: the race's, else native)."
    )] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Write the regime-classification report of the runs in --data: report.md, a self-contained report.html, regimes.json and figures (PNG and SVG)."""
    from planner.errors import ConfigError
    from planner.report import build_report
    from planner.schema import TARGETS

    # Inside the store folder by default (the store reads only runs/, failed/, corrupt/ and
    # its regimes.json), so a report stays with the runs it is of.
    if out is None:  # else a --data that is a file was blamed on an --out never given
        from planner.report.data import check_campaign_dir

        check_campaign_dir(data)
    out = data / "report" if out is None else out
    # The output first, before any fit: a refusal after the fits wasted them, and a name
    # over the length limit must be named as --out, not as a stat error.
    _check_out(out, data)
    check_not_store_folder(data)
    if target is None:
        from planner.report.race_summary import read_race

        race, _ = read_race(data)
        target = str(race.get("target", "native")) if race else "native"
    if target not in TARGETS:
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")
    from planner.cli.app import interrupted_code, terminate_as_interrupt
    from planner.files import shown_path
    from planner.report.build import is_earlier_report

    had = is_earlier_report(out)
    try:
        with terminate_as_interrupt():
            res = build_report(data, out, target=target, progress=not quiet)
    except KeyboardInterrupt as exc:
        # Its pages are written last, each whole: an earlier report stays readable, but the
        # figures it shares with this one may already be the new ones.
        left = (f"the earlier report in {shown_path(out)} is kept, though some of its figures may already be this run's"
                if had else "no report was written")
        typer.echo(f"interrupted: {left}; rerun the same command to write it", err=True)
        raise typer.Exit(interrupted_code(exc)) from None
    for w in res.warnings:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(res.message)
    # Shown, not opened: a folder name that is not UTF-8 was a UnicodeEncodeError here, after
    # the report was written.
    typer.echo(f"report: {shown_path(res.html)}")
    typer.echo(f"        {shown_path(res.markdown)}")
    figures = (f"{len(res.figures) // 2} figures in {shown_path(out / 'figures')}" if res.figures
               else "no figures: nothing to draw")  # no folder is made for none
    typer.echo(f"        {shown_path(res.regimes)} ({figures})")


def _check_out(out: Path, data: Path) -> None:
    """A one-line :class:`ConfigError` unless ``out`` can take the report's files without
    replacing anything that is not an earlier report."""
    from planner.errors import ConfigError
    from planner.files import check_creatable, resolved
    from planner.report.build import is_earlier_report

    if is_store_folder(out):
        # Its files would pose as (or, in corrupt/, be listed as) the store's records.
        raise ConfigError(f"out: {str(out)!r} is a pilot store's {out.name}/ folder; give a folder of its own, "
                          f"e.g. {str(out.parent / 'report')!r}")
    check_creatable(out / "report.md", "out")  # names, lengths, writable: before any stat
    # Before check_output_file, whose "is a directory; give a file name" fits a file option,
    # not the report's own file names inside --out.
    for name in ("report.md", "report.html", "regimes.json"):
        if (out / name).is_dir():
            raise ConfigError(f"out: {str(out / name)!r} is a directory where the report writes a file; "
                              "give another directory")
    check_output_file(out / "report.md", "out")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out: {str(out)!r} is a file; pass a directory for the report")
    if data.exists() and resolved(out, "out") == resolved(data, "data"):
        # The report writes its own regimes.json: in the data directory it would replace the race's.
        raise ConfigError(f"out: {str(out)!r} is the data directory; the report's regimes.json would replace "
                          f"the race's there, so give another directory (e.g. {str(data / 'report')!r})")
    if any((out / name).is_dir() for name in ("runs", "failed")):
        raise ConfigError(f"out: {str(out)!r} is a pilot store; its report's regimes.json would pass for its "
                          f"race's, so give another directory (e.g. {str(out / 'report')!r})")
    summary = out / "regimes.json"
    if summary.is_file() and not is_earlier_report(out):
        raise ConfigError(f"out: {str(summary)!r} is not an earlier report's (a race's summary?); the report "
                          "would replace it, so give another directory")
    if (out / "figures").exists() and not (out / "figures").is_dir():
        raise ConfigError(f"out: {str(out / 'figures')!r} is a file where the report writes its figures; "
                          "give another directory")
