"""Where a command may write: output paths checked before the work, so that nothing a
command writes replaces recorded work (a pilot store's records, a race's results, a
report's calls) and a bad path costs nothing to find out."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = [
    "STORE_FOLDERS", "check_not_report_folder", "check_not_store_folder", "check_output_dir", "check_output_file",
    "is_store_folder", "nonempty", "path_value",
]


# The folders of a pilot store that hold records (runners.store's layout).
STORE_FOLDERS = ("runs", "failed", "corrupt")


def path_value(value: str) -> Path:
    """typer's parser of a path option or argument: an empty one is refused. ``Path("")``
    is the current directory, so ``--data ''`` (an unset shell variable) wrote a pilot store
    into wherever the command ran, a checkout included."""
    import typer

    if not str(value).strip():
        raise typer.BadParameter("empty path; give a file or directory name")
    return Path(value)


def nonempty(value: str) -> str:
    """typer's parser of a text option: an empty one is refused rather than read as not
    given (``--plot ''`` wrote no figure and said nothing)."""
    import typer

    if not str(value).strip():
        raise typer.BadParameter("empty value; give one or leave the option out")
    return value


def check_output_file(path: str | Path, field: str) -> Path:
    """``path`` if a file can be written there; else a one-line :class:`ConfigError`.

    Checked before the work that produces it, so a typo costs nothing to find out."""
    from planner.errors import ConfigError
    from planner.files import check_creatable

    path = Path(path)
    check_creatable(path, field)  # first: is_dir() raises on a name over the length limit
    if path.is_dir():
        raise ConfigError(f"{field}: {str(path)!r} is a directory; give a file name")
    folder = path.resolve().parent
    if is_store_folder(folder):
        # A pilot store's record folder: a file there replaces or poses as a record.
        raise ConfigError(f"{field}: {str(path)!r} is inside a pilot store's {folder.name}/ folder, where it "
                          f"would replace or pose as a run record; write it beside the store, e.g. "
                          f"{str(folder.parent / path.name)!r}")
    kind = _summary_kind(path)
    if kind:
        raise ConfigError(f"{field}: {str(path)!r} holds {kind}, which this would replace; write it elsewhere, "
                          f"e.g. {str(path.with_name('proposals.json'))!r}")
    return path


def _summary_kind(path: Path) -> str | None:
    """What a race's or a report's summary file at ``path`` is (None for anything else):
    the results of runs, which a proposals or plan file written over it would lose."""
    try:
        if not path.is_file() or path.suffix != ".json" or path.stat().st_size > 50_000_000:
            return None
        doc = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    if doc.get("generated_by") == "planner report":
        return "a report's regime calls"
    if "stop_reason" in doc and "settings" in doc:
        return "a race's results"
    return None


def is_store_folder(path: Path) -> bool:
    """Whether ``path`` is (or, not there yet, would be) a pilot store's own ``runs/``,
    ``failed/`` or ``corrupt/`` folder: so named, not itself a store (a store may be called
    runs), and holding records or beside another of those folders. A lone folder that
    merely shares the name is not one."""
    if path.name not in STORE_FOLDERS:
        return False
    if path.is_dir():
        if any((path / n).is_dir() for n in STORE_FOLDERS):
            return False
        if any(path.glob("*.parquet")):
            return True
    return any((path.parent / n).is_dir() for n in STORE_FOLDERS if n != path.name)


def check_not_store_folder(data: Path, field: str = "data") -> None:
    """Refuse a pilot store's own ``runs/``, ``failed/`` or ``corrupt/`` folder given as the
    store (a slip of the shell's completion): read as a store it holds nothing, and runs
    written into it would make a store inside the store. A report's folder is refused too
    (:func:`check_not_report_folder`)."""
    from planner.errors import ConfigError

    if is_store_folder(data):
        raise ConfigError(f"{field}: {str(data)!r} is a pilot store's {data.name}/ folder; pass the store itself, "
                          f"{str(data.parent)!r}")
    check_not_report_folder(data, field)


def check_not_report_folder(data: Path, field: str = "data") -> None:
    """Refuse `planner report`'s output folder given as the store (it sits beside or inside
    the store, so a completion slip finds it): a race wrote its summary over the report's
    regimes.json and its runs into the report, execute made a store there, and suggest and
    report read it as an empty store (a fresh design, "no runs", exit 0)."""
    from planner.errors import ConfigError

    summary = data / "regimes.json"
    if _summary_kind(summary) != "a report's regime calls":
        return
    try:
        source = json.loads(summary.read_text()).get("data")
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        source = None
    where = (f"the store it reports on, {_reported_store(data, source)!r}" if isinstance(source, str) and source
             else "the pilot store")
    raise ConfigError(f"{field}: {str(data)!r} is a report's folder (`planner report` wrote its regimes.json), "
                      f"not a pilot store; pass {where}")


def _reported_store(report: Path, source: str) -> str:
    """The store a report's regimes.json names (its ``data``), as a path that works from here.

    A report writes it absolute. An older one kept ``--data`` as typed, relative to where
    `planner report` ran, which a command run elsewhere cannot follow: it is looked for
    from each folder above the report's (the default DATA/report, or a checkout's
    reports/NAME/data beside reports/NAME/report), as a store, and otherwise named as it
    was typed and said to be so."""
    path = Path(source)
    if path.is_absolute():
        return source
    for above in report.resolve().parents:
        found = above / path
        if any((found / n).is_dir() for n in ("runs", "failed")):
            return str(found)
    return f"{source} (relative to where `planner report` ran)"


def check_output_dir(path: str | Path, field: str) -> Path:
    """``path`` if it is, or can become, a directory that takes new files; else a one-line
    :class:`ConfigError`. Checked before any run, whose compute a refusal afterwards would
    waste."""
    from planner.errors import ConfigError
    from planner.files import check_creatable

    path = Path(path)
    try:
        is_file = path.is_file()
    except OSError:  # a name over the length limit: check_creatable says so
        is_file = False
    if is_file:
        raise ConfigError(f"{field}: {str(path)!r} is a file; give a directory")
    check_creatable(path / "probe", field, shown=path)  # a file in it: the folder itself may not exist yet
    return path
