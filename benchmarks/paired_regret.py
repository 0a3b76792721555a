"""Paired regret: ours against each equal-spend baseline, race by race, from a bench JSON.

The acceptance line compares *median* simple regret at equal spend. Medians of 60 calls
per world differ by noise too, so this reads the same outcomes as pairs: each baseline
was capped at the FLOPs ours spent in the same (world, repetition), so (repetition,
setting) pairs its call with ours. Per world and pooled it prints

* the two medians and their difference with a 90% bootstrap interval that resamples whole
  repetitions (the settings of one race share its runs, so they are not independent);
* the share of pairs where ours lost less (ties count half);
* the two-sided Wilcoxon signed-rank p-value (scipy) of the per-repetition mean paired
  difference: one number per (world, repetition), because the settings of one race are
  not independent either (20 repetitions give 20 values per world, 100 pooled over 5).

    python benchmarks/paired_regret.py [benchmarks/planner_bench_results.json ...] [--merge]

``--merge`` pools the files' outcomes into one table (e.g. repetitions 0-9 and the held-out
10-19, run with the same options of ours; the files must not share a repetition).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

BASELINES = ("random", "optuna-tpe", "optuna-gp")
DEFAULT = Path(__file__).resolve().parent / "planner_bench_results.json"


def pairs(outcomes: Sequence[dict[str, Any]], baseline: str) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """world -> rep -> (ours' regrets (n_settings,), the baseline's), for reps both ran.

    A baseline's race was capped at what ours spent in the same run of the benchmark, so
    outcomes pair only within one results file (``_file``, set by ``--merge``): ours from
    one file beside a baseline's same repetition from another would not be equal spend.
    """
    by: dict[tuple[str, str, str, int], np.ndarray] = {
        (o.get("_file", ""), o["strategy"], o["world"], o["rep"]): np.asarray(o["regret"], dtype=float)
        for o in outcomes if o["strategy"] in ("ours", baseline) and not o.get("config")
    }
    out: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    for (src, strategy, world, rep), ours in by.items():
        other = by.get((src, baseline, world, rep))
        if strategy == "ours" and other is not None and other.shape == ours.shape:
            out.setdefault(world, {})[rep] = (ours, other)
    return out


def compare(per_world: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]], *, n_boot: int = 2000,
            seed: int = 0) -> dict[str, Any]:
    """Paired statistics over the given worlds (one world, or several pooled).

    The bootstrap resamples repetitions within each world (stratified), keeping every
    setting of a drawn race together. The Wilcoxon test takes one value per race (the mean
    of its settings' paired differences) for the same reason. Returns medians, ``diff`` =
    median(ours) - median(baseline) with its 90% interval ``diff_ci``, ``ours_lower``,
    ``wilcoxon_p`` and ``n_reps`` (the races the test saw).
    """
    from scipy.stats import wilcoxon

    ours = np.concatenate([o for reps in per_world.values() for o, _ in reps.values()])
    base = np.concatenate([b for reps in per_world.values() for _, b in reps.values()])
    d = ours - base
    rng = np.random.default_rng(seed)
    boot = np.empty(n_boot)
    for i in range(n_boot):
        o_s, b_s = [], []
        for reps in per_world.values():
            keys = list(reps)
            for k in rng.choice(len(keys), size=len(keys), replace=True):
                o_s.append(reps[keys[k]][0])
                b_s.append(reps[keys[k]][1])
        boot[i] = np.median(np.concatenate(o_s)) - np.median(np.concatenate(b_s))
    per_rep = np.array([np.mean(o - b) for reps in per_world.values() for o, b in reps.values()])
    nonzero = per_rep[per_rep != 0]
    p = float(wilcoxon(nonzero).pvalue) if nonzero.size >= 2 else float("nan")
    return {
        "n": int(d.size),
        "n_reps": int(per_rep.size),
        "ours_median": float(np.median(ours)),
        "baseline_median": float(np.median(base)),
        "diff": float(np.median(ours) - np.median(base)),
        "diff_ci": [float(np.quantile(boot, 0.05)), float(np.quantile(boot, 0.95))],
        "ours_lower": float(np.mean(d < 0) + 0.5 * np.mean(d == 0)),
        "wilcoxon_p": p,
    }


def paired_table(outcomes: Sequence[dict[str, Any]], baselines: Sequence[str] = BASELINES) -> list[dict[str, Any]]:
    """One row per (baseline, world) and per baseline pooled over its worlds."""
    rows = []
    for b in baselines:
        per_world = pairs(outcomes, b)
        for w in sorted(per_world):
            rows.append({"baseline": b, "world": w, **compare({w: per_world[w]})})
        if len(per_world) > 1:
            rows.append({"baseline": b, "world": "pooled", **compare(per_world)})
    return rows


def print_paired(rows: Sequence[dict[str, Any]], title: str = "") -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title or "median regret, ours vs each equal-spend baseline (paired by repetition and setting)")
    for col in ("baseline", "world", "pairs", "reps", "ours", "baseline med", "diff [90% CI]", "ours lower",
                "Wilcoxon p (per rep)"):
        t.add_column(col, justify="right")
    for r in rows:
        lo, hi = r["diff_ci"]
        t.add_row(r["baseline"], r["world"], str(r["n"]), str(r["n_reps"]), f"{r['ours_median']:.4f}",
                  f"{r['baseline_median']:.4f}",
                  f"{r['diff']:+.4f} [{lo:+.4f}, {hi:+.4f}]", f"{r['ours_lower']:.2f}", f"{r['wilcoxon_p']:.2g}")
    Console(width=140).print(t)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=[str(DEFAULT)], help="planner_bench.py JSON results")
    ap.add_argument("--merge", action="store_true", help="one table over all files' outcomes")
    a = ap.parse_args(list(argv) if argv is not None else None)
    sets: list[tuple[str, list[dict[str, Any]]]] = []
    for f in a.files:
        try:
            doc = json.loads(Path(f).read_text())
            sets.append((Path(f).name, list(doc["outcomes"])))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"error: {f}: not a planner_bench.py results file ({e}); "
                             "give the --out JSON of benchmarks/planner_bench.py") from None
    if a.merge:
        seen: set[tuple[str, str, int]] = set()
        for name, outs in sets:
            keys = {(o["strategy"], o["world"], o["rep"]) for o in outs if not o.get("config")}
            if keys & seen:
                raise SystemExit(f"error: {name}: repeats a repetition of an earlier file; "
                                 "--merge takes files with disjoint repetitions (see --first-rep)")
            seen |= keys
        sets = [(" + ".join(n for n, _ in sets),
                 [{**o, "_file": str(i)} for i, (_, outs) in enumerate(sets) for o in outs])]
    out = []
    for name, outcomes in sets:
        rows = paired_table(outcomes)
        if not rows:
            raise SystemExit(f"error: {name}: no baseline ran beside ours; run planner_bench.py with "
                             "--strategies ours,random,optuna-tpe")
        print_paired(rows, title=f"{name}: median regret, ours vs equal-spend baselines (paired)")
        out += rows
    return out


if __name__ == "__main__":
    main()
