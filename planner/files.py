"""Writing the planner's own files (proposals, regimes, reports): whole or not at all."""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import math
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = [
    "TEMPORARY_IDLE_S", "atomic_write_text", "check_creatable", "default_file_mode", "dumps_json", "nearest_existing",
    "remove_idle", "resolved", "shown_path", "umask", "writes_through",
]

# How long a killed writer's temporary must sit untouched before it is deleted (a young one
# may be a live writer's).
TEMPORARY_IDLE_S = 3600.0


def umask() -> int:
    """The process umask (read by setting and restoring it: there is no getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """What ``open()`` would give a new file under the current umask (``mkstemp`` gives
    0600, which would hide a shared campaign's files from its other readers)."""
    return 0o666 & ~umask()


def nearest_existing(path: str | Path) -> tuple[Path, bool]:
    """The closest existing ancestor of ``path`` (itself if it exists) and whether new
    files or folders can be created in it: checked before work whose output goes there."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe, probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def shown_path(path: str | Path) -> str:
    """``path`` as text any page, figure or terminal can take. A name whose bytes are not
    UTF-8 (a latin-1 folder name) is held by Python with surrogates, which no UTF-8 writer
    accepts: ``planner report`` on such a folder was a traceback with no report. Those
    bytes are shown escaped (``runs_\\xff``, as Python shows bytes), the rest unchanged; the
    path itself stays for opening files."""
    text = os.fspath(path)
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte decodes to (text, not a name): escaped too
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "backslashreplace")


def resolved(path: str | Path, field: str) -> Path:
    """``path`` made absolute with its links followed; a one-line :class:`ConfigError`
    naming ``field`` for a loop of links (``Path.resolve`` raises RuntimeError there, a
    traceback from every output and --pending check)."""
    from planner.errors import ConfigError

    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as exc:
        why = "a loop of symbolic links" if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP \
            else f"not a path this system can resolve ({exc})"
        raise ConfigError(f"{field}: {str(path)!r} is {why}; give another path") from None


def check_creatable(path: str | Path, field: str, shown: str | Path | None = None) -> None:
    """A one-line :class:`ConfigError` naming ``field`` unless ``path`` can be created:
    every name in it is a legal length and its nearest existing folder takes a file (tried,
    not inferred from permission bits: root passes ``os.access`` on read-only mounts and on
    /proc). ``shown``: the path the refusal names, where ``path`` is a stand-in file in it."""
    from planner.errors import ConfigError

    path = Path(path)
    too_long = [part for part in path.parts if len(os.fsencode(part)) > 255]
    if too_long:  # before any stat: the OS refuses such names with an error, not False
        raise ConfigError(f"{field}: the name {too_long[0][:40]!r}... is {len(os.fsencode(too_long[0]))} bytes, "
                          "over the 255 a file name may have; give a shorter path")
    real = resolved(path, field)
    if writes_through(path):
        if path.exists():  # written in place (/dev/stdout): its folder need not take files
            if not os.access(path, os.W_OK):
                raise ConfigError(f"{field}: cannot write {str(path)!r} (permission denied); give another path")
            return
        path = real  # a dangling link: its target is the file to create
    parent, ok = nearest_existing(path.parent)
    if ok:
        try:
            fd, probe = tempfile.mkstemp(prefix=".probe-", dir=parent)
            os.close(fd)
            os.unlink(probe)
        except OSError:
            ok = False
    if not ok:
        # A file where a folder of the path goes (a store's runs/ or corrupt/): moving it
        # is the fix; "another path" would abandon the store.
        fix = ("move that file out of the way, or give another path" if parent.exists() and not parent.is_dir()
               else "give another path")
        raise ConfigError(f"{field}: cannot create {str(shown if shown is not None else path)!r} ({str(parent)!r} "
                          f"is not a writable directory); {fix}")


def writes_through(path: str | Path) -> bool:
    """Whether ``path`` is a symbolic link or an existing file that is not a regular one (a
    device, a FIFO, a socket): written through, not replaced by a rename (see
    :func:`atomic_write_text`)."""
    path = Path(path)
    try:
        if path.is_symlink():
            return True
        mode = path.stat().st_mode
    except OSError:  # absent, or a loop: created (or refused) as a plain file
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary in the same folder and a rename, so a
    reader (another process, a browser reloading a report) never sees half a file; no
    temporary is left behind when the write fails.

    A symbolic link or a special file (``/dev/null``, ``/dev/stdout``, a FIFO, a shell's
    ``>(jq .)``) is written through instead, not atomically: the rename replaced the link
    or the device with a regular file (as root, ``--out /dev/null`` turned the system's
    /dev/null into one), and a FIFO's reader waited for good."""
    path = Path(path)
    if writes_through(path):
        if not path.exists():  # a dangling link: its target is created, folders and all, as a path is
            Path(os.path.realpath(path)).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = _temporary_prefix(path.name)
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # A writer killed between mkstemp and the rename (SIGKILL, a lost node) left its
    # temporary; only this file's, and only idle ones: a young one may be a live writer's.
    remove_idle(path.parent, TEMPORARY_IDLE_S, glob.escape(prefix) + "*")
    return path


def _temporary_prefix(name: str) -> str:
    """``.NAME.tmp-``: named after its file, so a killed writer's leftover can be told from
    anyone else's. A name too long to take the prefix and mkstemp's 8 characters within a
    folder entry's 255 bytes (which check_creatable passes) is replaced by its digest."""
    prefix = f".{name}.tmp-"
    if len(os.fsencode(prefix)) + 8 > 255:
        prefix = f".{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}.tmp-"
    return prefix


def remove_idle(folder: Path, older_than_s: float, pattern: str = "*") -> int:
    """Delete the files matching ``pattern`` in ``folder`` not modified for ``older_than_s``
    seconds (what killed writers leave behind); how many went."""
    if not folder.is_dir():
        return 0
    removed, cutoff = 0, time.time() - older_than_s
    for p in folder.glob(pattern):
        try:
            if p.stat().st_mtime < cutoff:
                p.unlink()
                removed += 1
        except OSError:  # gone meanwhile, or not ours to delete
            continue
    return removed


def _finite_or_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite_or_none(v) for v in obj]
    if isinstance(obj, float):  # numpy floats subclass float
        return obj if math.isfinite(obj) else None
    return obj


def dumps_json(obj: Any, **kwargs: Any) -> str:
    """Standard JSON (readable by jq or JavaScript): NaN and infinities become null rather
    than Python's bare ``NaN``; numpy scalars become numbers, anything else not
    serialisable its string."""
    return json.dumps(_finite_or_none(obj), allow_nan=False, default=_plain, **kwargs)


def _plain(x: Any) -> Any:
    item = getattr(x, "item", None)  # numpy scalars: their Python value
    if callable(item):
        try:
            return _finite_or_none(item())
        except (TypeError, ValueError):
            pass
    return str(x)
