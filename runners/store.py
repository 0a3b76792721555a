"""The pilot store: one parquet file per record, safe under concurrent writers.

Layout of a data directory ``DIR``::

    DIR/runs/<run_id>.parquet               ok records, one row each (the dataset)
    DIR/failed/<run_id>.a<attempt>.parquet  failed attempts, kept apart from the dataset
    DIR/corrupt/<name>                      unreadable files moved aside by a later write

Why it is safe:

- A record is written to a hidden ``.tmp-*.part`` name in the destination folder, fsynced,
  then *hard-linked* to its final name. ``link`` fails if the name exists, so publishing is
  atomic and exclusive: readers see a whole file or none, and no writer ever replaces
  another's record (the first ok record of a run wins; a rerun adds no duplicate).
- Every row is written with the fixed :data:`ROW_SCHEMA`, so metric columns that are null
  in one record and numbers in another keep one dtype and
  ``polars.read_parquet("DIR/runs/*.parquet")`` reads the whole dataset as one table.
- Reads open each file on its own: a corrupt or truncated file is listed in the scan's
  ``corrupt`` (name and reason, :meth:`PilotStore.scan`) and skipped; the rest of the
  dataset still loads.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from polars.exceptions import PanicException

from planner.errors import ConfigError
from planner.files import TEMPORARY_IDLE_S, default_file_mode, remove_idle
from planner.schema import RunRecord

__all__ = ["ROW_SCHEMA", "CorruptRecord", "PilotStore", "Scan", "UnreadableError", "attempt_of", "run_of"]

_F, _I, _S = pl.Float64, pl.Int64, pl.String

# dtype of every column of RunRecord.to_row(); nullable columns included, so every file
# in runs/ has the same parquet schema whatever its values.
ROW_SCHEMA: dict[str, Any] = {
    "schema_version": _I,
    "run_id": _S,
    "proposal_id": _S,
    "status": _S,
    "engine": _S,
    "simulated": pl.Boolean,
    "model": _S,
    "model_params": _F,
    "reward": _S,
    "budget": _F,
    "rho_planned": _F,
    "rho": _F,
    "flops_search": _F,
    "flops_learning": _F,
    "flops_reward": _F,
    "flops_total": _F,
    "native": _F,
    "pass1": _F,
    "judge": _F,
    "seed": _I,
    "wall_s": _F,
    "attempt": _I,
    "error": _S,
    "created_at": _S,
    "plan_json": _S,
    "card_json": _S,
    "metrics_json": _S,
    "provenance_json": _S,
}

_FAILED_NAME = re.compile(r"^(?P<run>.+)\.a(?P<attempt>\d+)\.parquet$")


def attempt_of(path: Path, default: int) -> int:
    """The attempt number a failed record's file took (``PilotStore.add`` moves a failure
    to the next free number when another writer holds the one it asked for); ``default``
    for an ok record's file."""
    m = _FAILED_NAME.match(path.name)
    return int(m["attempt"]) if m else default


def run_of(path: Path) -> str | None:
    """The run a record file is named for (``<run_id>.parquet`` or ``<run_id>.a<N>.parquet``);
    None for any other name (a file moved aside to ``corrupt/`` carries a suffix)."""
    m = _FAILED_NAME.match(path.name)
    if m:
        return m["run"]
    return path.name.removesuffix(".parquet") if path.name.endswith(".parquet") else None


@dataclass(frozen=True)
class CorruptRecord:
    """A file in the store that could not be read as a record (it is skipped, not deleted)."""

    path: Path
    reason: str


@dataclass(frozen=True)
class Scan:
    """One read of the store: its records, and the files it could not read (each with its path
    and the reason)."""
    records: list[RunRecord]
    corrupt: list[CorruptRecord]


def _schema(row: dict[str, Any]) -> dict[str, Any]:
    """The columns and dtypes a record's flat ``row`` is written with."""
    schema = {k: ROW_SCHEMA.get(k) for k in row}
    # A column added to RunRecord later and not listed here: let polars infer it, but never
    # as the Null dtype, which would clash with the same column in other files.
    for k, dtype in schema.items():
        if dtype is None:
            inferred = pl.Series([row[k]]).dtype
            schema[k] = _S if inferred == pl.Null else inferred
    return schema


def _frame(record: RunRecord) -> pl.DataFrame:
    row = record.to_row()
    return pl.DataFrame([row], schema=_schema(row))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


# Flat columns that repeat a value held in the nested JSON: they must agree, or a reader
# of the flat table (polars, the docs' one-liner) sees something the record does not say.
_DERIVED = ("rho", "flops_search", "flops_learning", "flops_reward", "flops_total", "native", "pass1", "judge")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)  # NaN on both sides agrees
    return bool(a == b)


def _odd_columns(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """How a file's columns and dtypes differ from what its record writes, or None.

    A record rebuilds from its JSON whatever flat columns a file lacks or adds, but the
    docs' ``pl.read_parquet("DIR/runs/*.parquet")`` refuses a table of files whose columns
    or dtypes differ, so one such file broke every reader of the dataset while the store
    counted it intact and never rewrote it."""
    parts = []
    if missing := [c for c in want if c not in got]:
        parts.append("no column " + ", ".join(map(repr, missing)))
    if extra := [c for c in got if c not in want]:
        parts.append("an unknown column " + ", ".join(map(repr, extra)))
    parts += [f"column {c!r} is {got[c]}, not {want[c]}" for c in want if c in got and got[c] != want[c]]
    return "; ".join(parts) or None


class UnreadableError(ConfigError):
    """A record file or folder that permissions forbid reading: intact as far as anyone
    knows, so never listed corrupt, moved aside or run again."""


def _unreadable(path: Path, exc: OSError) -> UnreadableError:
    """The one-line error for a record (or folder) the store may not read. Not corrupt: its
    run is not redone, nor the file moved aside (a co-worker's umask 077 made every record
    of theirs "corrupt", and the next execute moved them away and ran them again)."""
    what = "list" if path.is_dir() else "read"
    return UnreadableError(f"data: cannot {what} {str(path)!r} ({(exc.strerror or str(exc)).lower()}); fix its permissions "
                       "(e.g. chmod a+rX) or use the store as its owner")


def _read_one(path: Path) -> list[RunRecord]:
    """Every row of one file as a record; raises on anything unreadable or invalid
    (:func:`_unreadable`'s ConfigError where permissions forbid reading it).

    A file in ``runs/`` must hold the one ok record its name says, and a file in
    ``failed/`` the failed attempt its name says: a record copied under another run's
    name would otherwise count that run as done and hide it for good."""
    try:
        mode = path.stat().st_mode
    except PermissionError as exc:  # a folder listed but not entered (r without x)
        raise _unreadable(path, exc) from None
    if stat.S_ISDIR(mode):  # polars' own message is a glob "Hint:" about expanded paths
        raise ConfigError("a directory, not a record file")
    if not stat.S_ISREG(mode):  # a FIFO blocked every reader for good (and SIGTERM with it)
        raise ConfigError("not a regular file (a pipe, socket or device)")
    if not os.access(path, os.R_OK):  # polars' own error for it is no PermissionError
        raise _unreadable(path, PermissionError(errno.EACCES, "permission denied"))
    try:
        # Through Python's open, not a path: a store under "pilot[v2]" read every record as a
        # glob matching nothing, and one whose path is not UTF-8 (a latin-1 name, a non-ASCII
        # one under a non-UTF-8 locale: surrogates polars cannot take) as "no .read() method";
        # each was listed corrupt, and the next execute moved each aside and reran it.
        # Decoded by pyarrow, not polars' reader: one byte of a page header (a negative value
        # count) made polars abort the process on a huge allocation (exit 134, past any
        # except, so status, execute and suggest all died on one damaged record), and other
        # damage made it panic with a dozen lines of Rust on stderr; pyarrow raises OSError.
        with open(path, "rb") as fh:
            data = fh.read()
        # One file's reader from memory, not pyarrow's dataset scan (pl.read_parquet's and
        # pq.read_table's): the scan's pool threads were now and then still live at
        # interpreter exit, and C++ aborted the process after the command's own exit ("terminate
        # called without an active exception", exit 134; apache/arrow#34314): 17 of 300 reads
        # before, 0 of 300 after (benchmarks/store_exit.py, side by side, two at a time).
        import pyarrow as pa
        import pyarrow.parquet as pq

        frame = pl.DataFrame(pl.from_arrow(pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)))
    except PanicException as exc:
        # A BaseException, past every `except Exception`: polars panics on some damaged files
        # (a flipped byte in a compressed page), and one such file crashed status and execute.
        why = str(exc).strip().splitlines()
        raise ConfigError(f"not a readable parquet file (polars panicked: {why[0] if why else 'no message'})") from None
    if frame.height == 0:
        raise ConfigError("empty file (no rows)")
    recs: list[RunRecord] = []
    for row in frame.iter_rows(named=True):
        rec = RunRecord.from_row(row)
        wrong = rec.inconsistency()
        if wrong is not None:
            raise ConfigError(f"record: {wrong}")
        canon = rec.to_row()
        if not recs and (odd := _odd_columns(dict(frame.schema), _schema(canon))):
            raise ConfigError(f"record: {odd} (edited by hand?)")
        for col in _DERIVED:
            if col in row and not _same(row[col], canon[col]):
                raise ConfigError(f"record: column {col!r} is {row[col]!r} but the record's JSON says "
                                  f"{canon[col]!r} (edited by hand?)")
        recs.append(rec)
    folder = path.parent.name
    if folder == "runs":
        stem = path.name.removesuffix(".parquet")
        if len(recs) != 1 or recs[0].status != "ok" or recs[0].run_id != stem:
            got = ", ".join(f"{r.status} {r.run_id}" for r in recs)
            # The count first: reasons are cut at 200 characters, and two ids fill them.
            raise ConfigError(f"record: holds {len(recs)} record(s) ({got}); runs/{path.name} must hold the "
                              f"ok record of {stem!r}")
    elif folder == "failed":
        m = _FAILED_NAME.match(path.name)
        if m is None or any(r.status != "failed" or r.run_id != m["run"] or r.attempt != int(m["attempt"])
                            for r in recs):
            got = ", ".join(f"{r.status} {r.run_id} attempt {r.attempt}" for r in recs)
            raise ConfigError(f"record: holds {len(recs)} record(s) ({got}); failed/{path.name} must hold "
                              "that failed attempt")
    return recs


@dataclass
class PilotStore:
    """A directory of run records (unreadable files: :meth:`scan`, :meth:`corrupt`)."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def failed_dir(self) -> Path:
        return self.root / "failed"

    @property
    def corrupt_dir(self) -> Path:
        return self.root / "corrupt"

    def path_for(self, record: RunRecord) -> Path:
        if record.status == "ok":
            return self.runs_dir / f"{record.run_id}.parquet"
        return self.failed_dir / f"{record.run_id}.a{record.attempt}.parquet"

    # -- writing ---------------------------------------------------------------------------

    def write(self, record: RunRecord) -> Path:
        """Write one record atomically; never rewrites another record. Returns its file."""
        return self.add(record)[0]

    def add(self, record: RunRecord) -> tuple[Path, bool]:
        """Write one record; ``(path, created)``. ``created`` is False when an intact ok
        record of the same run was already there (it is kept, the new one dropped)."""
        if record.status == "ok":
            return self._publish(_frame(record), self.path_for(record))
        # Failed attempts never collide: concurrent writers of the same attempt number
        # each take the next free number, so every failure is kept.
        attempt = record.attempt
        while True:
            rec = record if attempt == record.attempt else record.model_copy(update={"attempt": attempt})
            path, created = self._publish(_frame(rec), self.path_for(rec))
            if created:
                return path, True
            attempt += 1

    def _publish(self, frame: pl.DataFrame, final: Path) -> tuple[Path, bool]:
        folder = final.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=folder)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                frame.write_parquet(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, default_file_mode())  # mkstemp's 0600 would hide records from co-workers
            for _ in range(3):
                if self._link(tmp, final):
                    _fsync_dir(folder)
                    return final, True
                # None where the lstat itself fails (EIO): whatever is there is moved aside.
                ino: int | None = None
                try:
                    # The file read, by inode: a concurrent writer may quarantine the wreck and
                    # publish its good record under the name while this one reads the wreck.
                    ino = os.lstat(final).st_ino
                    _read_one(final)
                    return final, False  # an intact record is already there: keep it
                except FileNotFoundError:
                    if final.is_symlink():  # a dangling link holds the name: move it aside
                        self._quarantine(final)
                    continue  # or moved aside by someone else meanwhile; try again
                except UnreadableError:  # permissions: someone's record, intact
                    raise
                except Exception:
                    self._quarantine(final, ino)  # unreadable: move it aside, then publish ours
            raise OSError(f"could not publish {final} (it keeps reappearing corrupt)")
        finally:
            tmp.unlink(missing_ok=True)

    @staticmethod
    def _link(tmp: Path, final: Path) -> bool:
        """Atomically create ``final`` with ``tmp``'s content; False if it already exists."""
        try:
            os.link(tmp, final)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
        # A filesystem without hard links: rename is still atomic for readers, only the
        # "never replace" guarantee narrows to this check-then-rename window.
        if final.exists():
            return False
        os.replace(tmp, final)
        return True

    def _quarantine(self, path: Path, ino: int | None = None) -> None:
        """Move ``path`` to ``corrupt/`` if it is still the file read (inode ``ino``; None:
        whatever is there now); a record another writer published there meanwhile goes
        back (6 of 25 three-writer races onto one wreck moved a good record aside, and
        lost a failed attempt)."""
        self.corrupt_dir.mkdir(parents=True, exist_ok=True)
        dest = self.corrupt_dir / f"{path.name}.{time.time_ns()}"
        try:
            now = os.lstat(path).st_ino
            if ino is not None and now != ino:
                return  # already replaced: nothing of ours to move
            ino = now
            os.replace(path, dest)
        except FileNotFoundError:
            return
        if os.lstat(dest).st_ino != ino:  # replaced between the check and the move
            try:
                os.link(dest, path)
                dest.unlink()
            except FileExistsError:
                pass  # a third writer's record holds the name; this copy stays listed
            except OSError:  # no hard links here (see _link)
                if not path.exists():
                    os.replace(dest, path)

    def check_writable(self, field: str = "data") -> None:
        """A one-line :class:`ConfigError` naming ``field`` unless records can be written
        under ``runs/``, ``failed/`` and ``corrupt/``: checked before any run, whose compute a refusal
        afterwards would waste. Creates nothing (a probe file comes and goes)."""
        from planner.files import check_creatable

        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"{field}: {str(self.root)!r} is a file; give a directory for the pilot store")
        # corrupt/ too: a damaged record is moved there when its run is redone, and a file
        # in its place failed every such run as a crash (recorded twice, as failed attempts).
        for folder in (self.runs_dir, self.failed_dir, self.corrupt_dir):
            check_creatable(folder / "record.parquet", field)

    def sweep_temporaries(self, older_than_s: float = TEMPORARY_IDLE_S) -> int:
        """Delete hidden temporaries a killed writer left behind. Only old ones: a young one
        may belong to a writer that is still running. They are invisible to readers anyway."""
        return sum(remove_idle(folder, older_than_s, ".tmp-*.part") for folder in (self.runs_dir, self.failed_dir))

    # -- reading ---------------------------------------------------------------------------

    def _files(self, folder: Path) -> list[Path]:
        if not folder.is_dir():
            return []
        # Not glob: it reads a folder it may not list as an empty one (and the store as
        # holding no runs, all to be redone). The hidden temporaries end in .part.
        try:
            names = os.listdir(folder)
        except PermissionError as exc:
            raise _unreadable(folder, exc) from None
        return sorted(folder / n for n in names if n.endswith(".parquet") and not n.startswith("."))

    def scan(self, *, status: str | None = "ok") -> Scan:
        """Records with ``status`` ("ok", "failed" or None for both) and the corrupt files."""
        folders = {"ok": [self.runs_dir], "failed": [self.failed_dir], None: [self.runs_dir, self.failed_dir]}
        if status not in folders:
            raise ConfigError(f"status: unknown status {status!r}; use ok, failed or None")
        out: list[RunRecord] = []
        corrupt: list[CorruptRecord] = []
        seen: set[tuple[str, str, int]] = set()
        for folder in folders[status]:
            if folder.exists() and not folder.is_dir():
                # Not an empty store: whatever was recorded there is unreadable, and a store
                # that read as "0 ok" would quietly redo every run.
                corrupt.append(CorruptRecord(folder, f"{folder.name}/ is a file, not the folder of records"))
                continue
            for path in self._files(folder):
                try:
                    recs = _read_one(path)
                except FileNotFoundError:
                    if path.is_symlink():  # a link whose target is gone: no writer moves those
                        corrupt.append(CorruptRecord(path, f"dangling link to {os.readlink(path)}"[:200]))
                    continue  # otherwise moved aside by a concurrent writer
                except UnreadableError:  # permissions: not corrupt, and not to redo
                    raise
                except PermissionError as exc:  # from polars or deeper: the same
                    raise _unreadable(path, exc) from None
                except Exception as exc:  # truncated, not parquet, wrong columns, bad values
                    msg = str(exc).strip().splitlines()
                    corrupt.append(CorruptRecord(path, (msg[0] if msg else type(exc).__name__)[:200]))
                    continue
                for rec in recs:
                    key = (rec.run_id, rec.status, rec.attempt if rec.status == "failed" else 0)
                    if key in seen:
                        continue  # a copy under another name: count the run once
                    seen.add(key)
                    out.append(rec)
        return Scan(out, corrupt)

    def records(self, *, status: str | None = "ok") -> list[RunRecord]:
        return self.scan(status=status).records

    def run_ids(self, *, status: str | None = "ok") -> set[str]:
        return {r.run_id for r in self.records(status=status)}

    def table(self, *, status: str | None = "ok") -> pl.DataFrame:
        """Valid records as one table with the flat columns (see ``ROW_SCHEMA``)."""
        recs = self.records(status=status)
        if not recs:
            return pl.DataFrame(schema=ROW_SCHEMA)
        return pl.concat([_frame(r) for r in recs], how="diagonal_relaxed")

    def has_ok(self, run_id: str) -> bool:
        """Whether an intact ok record of ``run_id`` exists (reads only that one file)."""
        try:
            return any(r.run_id == run_id for r in _read_one(self.runs_dir / f"{run_id}.parquet"))
        except UnreadableError:
            raise  # a record it may not read is no reason to run it again
        except Exception:
            return False

    def _failed_files(self, run_id: str) -> dict[Path, int]:
        """``failed/`` files of ``run_id`` and the attempt number each one's name says."""
        out = {}
        for path in self._files(self.failed_dir):
            m = _FAILED_NAME.match(path.name)
            if m and m["run"] == run_id:
                out[path] = int(m["attempt"])
        return out

    def failed_attempts(self, run_id: str) -> int:
        """Highest failed attempt number recorded for ``run_id`` (0 if none), from file names."""
        return max(self._failed_files(run_id).values(), default=0)

    def failed_by(self, run_id: str, task: str) -> bool:
        """Whether a failed record of ``run_id`` written for the attempt ``task`` (its
        ``provenance["task"]`` nonce) is in the store, whatever attempt number it took."""
        for path in self._failed_files(run_id):
            try:
                if any((r.provenance or {}).get("task") == task for r in _read_one(path)):
                    return True
            except Exception:
                continue  # unreadable: listed as corrupt elsewhere
        return False

    def corrupt(self) -> list[CorruptRecord]:
        """Unreadable files in runs/ and failed/, plus those already moved to corrupt/."""
        found = list(self.scan(status=None).corrupt)
        if self.corrupt_dir.is_dir():
            found += [
                CorruptRecord(p, "moved aside: unreadable when a rerun wrote this run")
                for p in sorted(self.corrupt_dir.iterdir())
            ]
        return found

    def fingerprint(self, folders: Iterable[str] = ("runs", "failed")) -> dict[str, tuple[int, int]]:
        """(size, mtime_ns) of every record file: cheap proof that nothing was touched."""
        out: dict[str, tuple[int, int]] = {}
        for name in folders:
            for p in self._files(self.root / name):
                st: os.stat_result | None
                try:
                    st = p.stat()
                except FileNotFoundError:  # a dangling link, or moved aside meanwhile
                    st = p.lstat() if p.is_symlink() else None
                if st is None:
                    continue
                out[f"{name}/{p.name}"] = (st.st_size, st.st_mtime_ns)
        return out
