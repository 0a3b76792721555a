"""Writing the planner's own files (proposals, regimes, reports): whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text", "default_file_mode"]


def default_file_mode() -> int:
    """What ``open()`` would give a new file under the current umask (``mkstemp`` gives
    0600, which would hide a shared campaign's files from its other readers)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary in the same folder and a rename, so a
    reader (another process, a browser reloading a report) never sees half a file; no
    temporary is left behind when the write fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
