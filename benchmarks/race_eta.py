"""How close is the race's estimate of the time left? Scored on real races' round lines.

A race not on a terminal prints a line per round (``race round 3: 14/20 runs, 3.53e+12
FLOPs, 2:57 in ...``). For each race that ended on its run cap, this takes every round
line but the first and the last, and compares what each pace would have said was left
with the time the cap then took:

* ``last round``: the last round's seconds per run (what the race said until 12-04);
* ``since round 1``: the seconds per run of every round after the first, together
  (:func:`planner.cli.race_display.time_left`, what it says now);
* ``whole race``: the time since the race began per run, the first round included.

    python benchmarks/race_eta.py [LOG ...] [--out F.json]

Without LOG it reads the stored logs, ``benchmarks/results/race_eta_1204/*.log``: three
20-run trl races on tiny-s at 5e11 FLOPs, pilots at 1e11, two workers, on an idle 2-core
AMD EPYC box on 12-04 (the main job at 3d3eee0, then the same race with structured and
dense, and with sparse and structured rewards; round lines only). The pace since round 1
was chosen on those; two later races are held out in
``benchmarks/results/race_eta_1204_heldout/`` (sparse and dense at 1e12 with pilots at
2e11 and a 16-run cap; dense alone, 14 runs). Error is the estimate over the actual
time, minus one; ``|log|`` is |ln(estimate / actual)|.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STORED = ROOT / "benchmarks" / "results" / "race_eta_1204"
HELD_OUT = ROOT / "benchmarks" / "results" / "race_eta_1204_heldout"
ROUND = re.compile(r"race round \d+: (\d+)/(\d+) runs, ([0-9.e+]+)(?:/[0-9.e+]+)? FLOPs, (?:(\d+):)?(\d+):(\d+) in")
PACES = ("last round", "since round 1", "whole race")


def rounds(text: str) -> list[tuple[float, int, float]]:
    """``(seconds in, runs, FLOPs)`` of each round line in ``text``."""
    out = []
    for line in text.splitlines():
        if m := ROUND.search(line):
            h, mm, ss = int(m[4] or 0), int(m[5]), int(m[6])
            out.append((3600.0 * h + 60.0 * mm + ss, int(m[1]), float(m[3])))
    return out


def run_cap(text: str) -> int | None:
    """The run cap its round lines name (None: no round line)."""
    m = ROUND.search(text)
    return int(m[2]) if m else None


def estimates(rows: Sequence[tuple[float, int, float]], cap: int) -> list[dict[str, float]]:
    """Per round after the first and before the last: the actual time left and each
    pace's estimate of it (``[]`` where the race did not end on its run cap)."""
    from planner.cli.race_display import time_left

    if len(rows) < 3 or rows[-1][1] != cap:
        return []
    end = rows[-1][0]
    out = []
    for k in range(1, len(rows) - 1):
        t, runs, _ = rows[k]
        last = time_left(rows[k], rows[k - 1], cap, None)
        since = time_left(rows[k], rows[0], cap, None)
        out.append({"runs": runs, "actual": end - t,
                    "last round": last[0] if last else math.nan,
                    "since round 1": since[0] if since else math.nan,
                    "whole race": (cap - runs) * t / runs})
    return out


def score(points: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each pace's median |error|, mean and median |log ratio|, and share within 35%."""
    out = {}
    for pace in PACES:
        ratio = sorted(p[pace] / p["actual"] for p in points)
        err = sorted(abs(r - 1) for r in ratio)
        logs = sorted(abs(math.log(r)) for r in ratio)
        out[pace] = {"n": len(ratio), "median_abs_error": _median(err), "mean_abs_log": sum(logs) / len(logs),
                     "median_abs_log": _median(logs), "max_abs_log": logs[-1],
                     "within_35pct": sum(e <= 0.35 for e in err) / len(err)}
    return out


def _median(v: Sequence[float]) -> float:
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from rich.console import Console
    from rich.table import Table

    from planner.errors import ConfigError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*", type=Path, help="race logs (default: the stored ones)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    logs = args.logs or sorted(STORED.glob("*.log"))
    points: list[dict[str, float]] = []
    per_log: dict[str, list[dict[str, float]]] = {}
    for log in logs:
        if not log.is_file():
            raise ConfigError(f"logs: {str(log)!r} is not a file; give race logs (a race's output off a terminal)")
        text = log.read_text(errors="replace")
        cap = run_cap(text)
        per_log[log.name] = estimates(rounds(text), cap) if cap else []
        points += per_log[log.name]
    if not points:
        raise ConfigError("logs: no race in them ended on its run cap after three rounds or more; nothing to score")
    table = Table(title="estimated time to the run cap against the time it took (error = estimate / actual - 1)")
    for h in ("race", "runs", "actual s", *PACES):
        table.add_column(h, justify="left" if h == "race" else "right")
    for name, pts in per_log.items():
        for p in pts:
            table.add_row(name, str(p["runs"]), f"{p['actual']:.0f}",
                          *(f"{p[k]:.0f} ({p[k] / p['actual'] - 1:+.0%})" for k in PACES))
    scores = score(points)
    summary = Table(title=f"over {len(points)} estimates")
    for h in ("pace", "median |error|", "mean |log|", "median |log|", "max |log|", "within 35%"):
        summary.add_column(h, justify="left" if h == "pace" else "right")
    for pace, s in scores.items():
        summary.add_row(pace, f"{s['median_abs_error']:.0%}", f"{s['mean_abs_log']:.2f}", f"{s['median_abs_log']:.2f}",
                        f"{s['max_abs_log']:.2f}", f"{s['within_35pct']:.2f}")
    console = Console()
    console.print(table)
    console.print(summary)
    shown = [str(x.resolve().relative_to(ROOT)) if x.resolve().is_relative_to(ROOT) else str(x) for x in logs]
    result = {"logs": shown, "estimates": per_log, "scores": scores}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
