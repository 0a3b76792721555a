"""The pilot store: one parquet file per record under ``DIR/runs/``.

Writes go to a hidden temporary name in the same folder and are renamed into place
(atomic on POSIX), so readers never see half a record and concurrent writers never touch
each other's files. ``polars.read_parquet("DIR/runs/*.parquet")`` reads the whole
dataset as one table (hidden temporaries do not match the glob).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from planner.errors import ConfigError
from planner.schema import RunRecord

__all__ = ["CorruptRecord", "PilotStore"]


@dataclass(frozen=True)
class CorruptRecord:
    path: Path
    reason: str


@dataclass
class PilotStore:
    """A directory of run records. ``corrupt_`` lists files skipped by the last read."""

    root: Path
    corrupt_: list[CorruptRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def path_for(self, record: RunRecord) -> Path:
        suffix = "" if record.status == "ok" else f".failed{record.attempt}"
        return self.runs_dir / f"{record.run_id}{suffix}.parquet"

    def write(self, record: RunRecord) -> Path:
        """Write one record atomically; never rewrites another run's file."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        final = self.path_for(record)
        frame = pl.DataFrame([record.to_row()])
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=self.runs_dir)
        os.close(fd)
        try:
            frame.write_parquet(tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return final

    def _files(self) -> list[Path]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p for p in self.runs_dir.glob("*.parquet") if not p.name.startswith("."))

    def table(self) -> pl.DataFrame:
        """All readable records as one table; corrupt files are skipped and listed in ``corrupt_``."""
        self.corrupt_ = []
        frames = []
        for path in self._files():
            try:
                frames.append(pl.read_parquet(path))
            except Exception as exc:  # truncated or not parquet at all
                self.corrupt_.append(CorruptRecord(path, str(exc).splitlines()[0][:200]))
        if not frames:
            return pl.DataFrame()
        return pl.concat(frames, how="diagonal_relaxed")

    def records(self, *, status: str | None = "ok") -> list[RunRecord]:
        table = self.table()
        out: list[RunRecord] = []
        for row in table.iter_rows(named=True):
            try:
                rec = RunRecord.from_row(row)
            except ConfigError as exc:
                self.corrupt_.append(CorruptRecord(self.runs_dir / f"{row.get('run_id')}", str(exc)))
                continue
            if status is None or rec.status == status:
                out.append(rec)
        return out

    def run_ids(self, *, status: str | None = "ok") -> set[str]:
        return {r.run_id for r in self.records(status=status)}
