"""What the benchmark scripts share at their command line: reading a stored results file
and turning bad input into one line.

The planner's own commands answer bad input with ``error: <field>: <fix>`` and exit 2; the
scripts here do the same through :func:`run` (a :class:`~planner.errors.ConfigError` from
anywhere below, e.g. ``load_world`` on an unknown name) and :func:`read_results` (a results
file that is missing, not JSON, or lacks a key the script reads).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from planner.errors import ConfigError

__all__ = ["check_known", "read_results", "run"]

T = TypeVar("T")


def read_results(path: str | Path, keys: Sequence[str] = ("config", "outcomes"),
                 what: str = "a planner_bench.py results file (its --out JSON)") -> dict[str, Any]:
    """The JSON object stored at ``path``, checked to carry ``keys``; a one-line
    :class:`ConfigError` naming the file and what to give instead otherwise."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it ({e.strerror or e}); give {what}") from None
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON ({e}); give {what}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: holds a JSON {type(doc).__name__}, not an object; give {what}")
    missing = [k for k in keys if k not in doc]
    if missing:
        raise ConfigError(f"{path}: has no {missing[0]!r}; give {what}")
    return doc


def check_known(field: str, values: Iterable[str], known: Iterable[str]) -> None:
    """Refuse the first of ``values`` not in ``known``, naming the field and the choices."""
    known = list(known)
    for v in values:
        if v not in known:
            raise ConfigError(f"{field}: unknown {v!r}; use one of: {', '.join(known)}")


def run(main: Callable[..., T], argv: Sequence[str] | None = None) -> T:
    """Call ``main(argv)``; a :class:`ConfigError` becomes ``error: ...`` on stderr and exit 2
    (the same line and code as the planner's commands)."""
    try:
        return main(argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
