"""How often a process that reads the store dies at interpreter exit, per record reader.

pyarrow's dataset scan (behind ``pl.read_parquet(fh, use_pyarrow=True)``, the store's
reader until 12-05) starts pool threads that are now and then still alive at interpreter
exit, and C++ then aborts the process after its own exit code: ``terminate called without
an active exception``, exit 134 (apache/arrow#34314). The store now reads each file with
pyarrow's single-file reader on the calling thread (``runners.store._read_one``).

Side by side in one run: a sim race fills a store, then ``--pairs`` times two child
processes at once (as two commands on one box) each read every record with one reader
and exit 2; the table counts the exits that are not 2. Readers:

* ``dataset``: ``pl.read_parquet(fh, use_pyarrow=True)`` on each file, the old reader;
* ``store``: ``PilotStore.scan``, the store as shipped.

    python benchmarks/store_exit.py --pairs 150
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

READERS = {
    "dataset": """
import glob, sys
import polars as pl
for f in sorted(glob.glob(sys.argv[1] + "/runs/*.parquet")):
    with open(f, "rb") as fh:
        pl.read_parquet(fh, use_pyarrow=True)
sys.exit(2)
""",
    "store": """
import sys
from runners.store import PilotStore
scan = PilotStore(sys.argv[1]).scan(status=None)
assert scan.records and not scan.corrupt
sys.exit(2)
""",
}


def fill_store(data: Path, runs: int) -> None:
    """A sim race of ``runs`` runs into ``data`` (the records the children read)."""
    from typer.testing import CliRunner

    from planner.cli import app

    res = CliRunner().invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                                   "--rewards", "sparse", "--max-runs", str(runs), "--quiet", "--data", str(data)])
    if res.exit_code != 0:
        raise SystemExit(f"error: the sim race that fills the store failed: {res.output.strip()[-300:]}")


def count_exits(data: Path, reader: str, pairs: int, progress: Any = None) -> Counter[int]:
    """Exit codes of ``2 * pairs`` children reading ``data`` with ``reader``, two at a time."""
    codes: Counter[int] = Counter()
    cmd = [sys.executable, "-c", READERS[reader], str(data)]
    for _ in range(pairs):
        procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
        for p in procs:
            codes[p.wait()] += 1
        if progress is not None:
            progress()
    return codes


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=150, help="pairs of child processes per reader")
    ap.add_argument("--runs", type=int, default=8, help="records in the store")
    ap.add_argument("--readers", default="dataset,store", help="comma-separated: dataset, store")
    a = ap.parse_args(argv)
    from planner.errors import ConfigError

    if a.pairs < 1 or a.runs < 1:
        raise ConfigError("pairs: need at least 1 pair and 1 run (--pairs, --runs)")
    readers = [r.strip() for r in a.readers.split(",") if r.strip()]
    if unknown := [r for r in readers if r not in READERS]:
        raise ConfigError(f"readers: unknown {unknown[0]!r}; use {', '.join(READERS)}")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        fill_store(data, a.runs)
        with Progress(transient=True) as bar:
            for r in readers:
                task = bar.add_task(r, total=a.pairs)
                out[r] = count_exits(data, r, a.pairs, lambda t=task: bar.advance(t))
    table = Table(title=f"exits of {2 * a.pairs} store reads per reader, two at a time ({a.runs} records)")
    for col in ("reader", "exit 2 (its own)", "exit 134 (abort)", "other"):
        table.add_column(col, justify="right")
    for r, codes in out.items():
        n134 = codes[134] + codes[-6]
        table.add_row(r, str(codes[2]), str(n134), str(sum(codes.values()) - codes[2] - n134))
    Console().print(table)
    return {r: dict(c) for r, c in out.items()}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
